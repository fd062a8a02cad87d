//! Two of ARCHITECTURE.md's invariants over the sources, read with syn (a
//! grep for `Command::new(` missed processes spawned from the `Command` a
//! method handed out; one for `sleep(` missed a loop on `interval`):
//!
//! * one command runner: no file but `labkit/src/command.rs` names
//!   `process::Command` (std's or tokio's, or `CommandExt`) or calls a
//!   `.spawn()` of no arguments (a `Command`'s, however it was obtained),
//!   and the runner hands out no unstarted `Command`;
//! * one poller: no loop sleeps or ticks (`sleep`, `interval`, `.tick()`)
//!   but in `labkit/src/eventually.rs` (its waits, and `throughout` for a
//!   state that must hold over a window) and the functions allowed below. A
//!   test in paused time (`start_paused`) is not a wait: its sleeps move the
//!   virtual clock of the scenario it plays (reconciles every 10 ms).

use proc_macro2::{TokenStream, TokenTree};
use syn::{spanned::Spanned, visit::Visit};

use super::{docs::TRACKED, read};

const RUNNER: &str = "labkit/src/command.rs";

/// Where a process is started without the runner, and why.
const SPAWN_ALLOWED: &[&str] = &[
    RUNNER,
    // The controller's own tests of its binary: the controller cannot use
    // labkit, which depends on it.
    "controller/tests/bad_input.rs",
    "controller/tests/shutdown.rs",
];

/// The functions (file, name; `*` all) whose loops sleep or tick, and why
/// that is the behaviour, not a wait.
const TIMED_LOOP_ALLOWED: &[(&str, &str)] = &[
    // The one poller.
    ("labkit/src/eventually.rs", "*"),
    // The watch's growing gaps after a failure (client-go's backoff).
    ("controller/src/runner.rs", "inform"),
    // The level-triggered resync, every --resync; and step 4's, as the course writes it.
    ("controller/src/runner.rs", "resync"),
    ("controller/examples/step4_controller.rs", "main"),
    // An Event waits for a quiet second between reconciles (docs/controller.md), a pace.
    ("controller/src/events.rs", "quiet"),
    // The paused-time tests' poll: the controller cannot use labkit, which depends on it.
    ("controller/src/runner.rs", "wait_for"),
    // The mock API server answering a list late, as a slow one does, in paused time.
    ("controller/src/fixtures.rs", "start_with"),
    // `lab logs -f` follows a growing file, as `tail -f` does.
    ("xtask/src/lab/envtest/logs.rs", "show"),
    // A line every so often while a process's exit is awaited (not polled).
    ("maint/src/test/alongside.rs", "exit"),
];

/// `file:line: what` for each finding of `check` in a tracked Rust file
/// that `allowed` (given the file and the finding) does not let pass.
fn findings(
    check: fn(&str) -> Vec<(usize, String)>,
    allowed: impl Fn(&str, &str) -> bool,
) -> Vec<String> {
    let files = TRACKED.iter().filter(|f| f.ends_with(".rs"));
    files
        .flat_map(|file| check(&read(file)).into_iter().map(move |found| (file, found)))
        .filter(|(file, (_, what))| !allowed(file, what))
        .map(|(file, (line, what))| format!("{file}:{line}: {what}"))
        .collect()
}

fn parse(source: &str) -> syn::File {
    syn::parse_file(source).unwrap_or_else(|e| panic!("does not parse: {e}"))
}

/// Lines and what was found on them.
#[derive(Default)]
struct Found(Vec<(usize, String)>);

impl Found {
    fn add(&mut self, at: impl Spanned, what: impl Into<String>) {
        self.0.push((at.span().start().line, what.into()));
    }
}

fn is_command(ident: &syn::Ident) -> bool {
    ident == "Command" || ident == "CommandExt"
}

/// A process started, or a command named, in `source`.
fn spawns(source: &str) -> Vec<(usize, String)> {
    struct Spawns(Found);
    impl Spawns {
        /// `use` trees: `process::Command`, `process::{…, CommandExt}`, `process::*`.
        fn use_tree(&mut self, tree: &syn::UseTree, in_process: bool) {
            match tree {
                syn::UseTree::Path(p) => self.use_tree(&p.tree, p.ident == "process"),
                syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(t, in_process)),
                syn::UseTree::Name(n) if in_process && is_command(&n.ident) => {
                    self.0.add(n, format!("use process::{}", n.ident));
                }
                syn::UseTree::Rename(r) if in_process && is_command(&r.ident) => {
                    self.0.add(r, format!("use process::{}", r.ident));
                }
                syn::UseTree::Glob(g) if in_process => self.0.add(g, "use process::*"),
                _ => {}
            }
        }
    }
    impl<'ast> Visit<'ast> for Spawns {
        fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
            self.use_tree(&item.tree, false);
        }
        fn visit_path(&mut self, path: &'ast syn::Path) {
            let names: Vec<&syn::Ident> = path.segments.iter().map(|s| &s.ident).collect();
            if names.windows(2).any(|w| w[0] == "process" && is_command(w[1])) {
                self.0.add(path, "process::Command");
            }
            syn::visit::visit_path(self, path);
        }
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            if call.method == "spawn" && call.args.is_empty() {
                self.0.add(&call.method, ".spawn()");
            }
            syn::visit::visit_expr_method_call(self, call);
        }
    }
    let mut spawns = Spawns(Found::default());
    spawns.visit_file(&parse(source));
    spawns.0.0
}

/// The public functions of `source` (the runner) that return a `Command`.
fn commands_handed_out(source: &str) -> Vec<(usize, String)> {
    struct Public(Found);
    impl Public {
        fn signature(&mut self, vis: &syn::Visibility, sig: &syn::Signature) {
            let syn::ReturnType::Type(_, returns) = &sig.output else { return };
            if matches!(vis, syn::Visibility::Public(_)) && names_command(returns) {
                self.0.add(&sig.ident, format!("pub fn {} returns a Command", sig.ident));
            }
        }
    }
    impl<'ast> Visit<'ast> for Public {
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            self.signature(&f.vis, &f.sig);
        }
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            self.signature(&f.vis, &f.sig);
        }
    }
    let mut public = Public(Found::default());
    public.visit_file(&parse(source));
    public.0.0
}

/// Whether a type names `Command` (`anyhow::Result<std::process::Command>`).
fn names_command(ty: &syn::Type) -> bool {
    #[derive(Default)]
    struct Named(bool);
    impl<'ast> Visit<'ast> for Named {
        fn visit_path_segment(&mut self, segment: &'ast syn::PathSegment) {
            self.0 |= segment.ident == "Command";
            syn::visit::visit_path_segment(self, segment);
        }
    }
    let mut named = Named::default();
    named.visit_type(ty);
    named.0
}

/// The names `tokens` call (an identifier before a parenthesis), through every group.
fn calls(tokens: &TokenStream) -> Vec<String> {
    let mut found = Vec::new();
    let mut last = None;
    for token in tokens.clone() {
        if let TokenTree::Group(g) = &token {
            if g.delimiter() == proc_macro2::Delimiter::Parenthesis {
                found.extend(last.take());
            }
            found.extend(calls(&g.stream()));
        }
        last = match token {
            TokenTree::Ident(i) => Some(i.to_string()),
            _ => None,
        };
    }
    found
}

/// The loops of `source` that sleep or tick.
fn timed_loops(source: &str) -> Vec<(usize, String)> {
    const TIMERS: &[&str] = &["sleep", "sleep_until", "interval", "interval_at", "tick"];
    /// The timer a loop's body calls, if any (in a macro's tokens too: `select!`).
    #[derive(Default)]
    struct Timer(Option<String>);
    impl<'ast> Visit<'ast> for Timer {
        fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
            if let syn::Expr::Path(p) = &*call.func
                && let Some(last) = p.path.segments.last()
                && TIMERS.iter().any(|t| last.ident == t)
            {
                self.0.get_or_insert(last.ident.to_string());
            }
            syn::visit::visit_expr_call(self, call);
        }
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            if TIMERS.iter().any(|t| call.method == t) {
                self.0.get_or_insert(format!(".{}()", call.method));
            }
            syn::visit::visit_expr_method_call(self, call);
        }
        fn visit_macro(&mut self, mac: &'ast syn::Macro) {
            if let Some(t) = calls(&mac.tokens).into_iter().find(|c| TIMERS.contains(&c.as_str())) {
                self.0.get_or_insert(t);
            }
        }
    }
    /// The loops found, and the function they are in.
    struct Loops(Found, String);
    impl Loops {
        fn body(&mut self, at: impl Spanned, body: &syn::Block) {
            let mut timer = Timer::default();
            timer.visit_block(body);
            if let Some(timer) = timer.0 {
                self.0.add(at, format!("{}: a loop on {timer}", self.1));
            }
        }
        /// Into `function`, unless it is a test in paused time.
        fn function(&mut self, attrs: &[syn::Attribute], name: &syn::Ident, body: &syn::Block) {
            let paused = attrs.iter().any(|a| {
                let syn::Meta::List(list) = &a.meta else { return false };
                list.tokens.clone().into_iter().any(|t| t.to_string() == "start_paused")
            });
            if !paused {
                let outer = std::mem::replace(&mut self.1, name.to_string());
                self.visit_block(body);
                self.1 = outer;
            }
        }
    }
    impl<'ast> Visit<'ast> for Loops {
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            self.function(&f.attrs, &f.sig.ident, &f.block);
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            self.function(&f.attrs, &f.sig.ident, &f.block);
        }
        fn visit_expr_loop(&mut self, e: &'ast syn::ExprLoop) {
            self.body(e.loop_token, &e.body);
            syn::visit::visit_expr_loop(self, e);
        }
        fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
            self.body(e.while_token, &e.body);
            syn::visit::visit_expr_while(self, e);
        }
        fn visit_expr_for_loop(&mut self, e: &'ast syn::ExprForLoop) {
            self.body(e.for_token, &e.body);
            syn::visit::visit_expr_for_loop(self, e);
        }
    }
    let mut loops = Loops(Found::default(), String::new());
    loops.visit_file(&parse(source));
    loops.0.0
}

#[test]
fn every_process_is_started_by_the_one_runner() {
    let mut elsewhere = findings(spawns, |file, _| SPAWN_ALLOWED.contains(&file));
    let handed_out = commands_handed_out(&read(RUNNER));
    elsewhere.extend(handed_out.into_iter().map(|(l, f)| format!("{RUNNER}:{l}: {f}")));
    assert!(elsewhere.is_empty(), "processes started outside {RUNNER}:\n{}", elsewhere.join("\n"));
}

#[test]
fn the_runner_check_finds_a_process_started_elsewhere() {
    let planted = "use std::{io, process::{Command as C, Stdio}};\n\
                   use tokio::process::*;\n\
                   fn a(cmd: Cmd) { let mut c = cmd.echoed().unwrap(); c.spawn(); }\n\
                   fn b() { std::os::unix::process::CommandExt::process_group(&mut c, 0); }\n\
                   fn c() -> tokio::process::Command { made() }\n";
    let found: Vec<String> =
        spawns(planted).into_iter().map(|(l, w)| format!("{l}: {w}")).collect();
    assert_eq!(
        found,
        [
            "1: use process::Command",
            "2: use process::*",
            "3: .spawn()",
            "4: process::Command",
            "5: process::Command"
        ]
    );
    let fine = "fn a(cmd: Cmd) { cmd.spawn(Stdio::piped(), Stdio::null()); tokio::spawn(f); }";
    assert!(spawns(fine).is_empty());
    let runner = "impl Cmd { pub fn echoed(&self) -> anyhow::Result<Command> { Ok(self.c()) }\n\
                  fn to_command(&self) -> Command { self.c() } }";
    assert_eq!(commands_handed_out(runner), [(1, "pub fn echoed returns a Command".into())]);
}

#[test]
fn waits_go_through_the_one_poller() {
    let elsewhere = findings(timed_loops, |file, what| {
        let function = what.split(':').next().unwrap_or_default();
        TIMED_LOOP_ALLOWED.iter().any(|&(f, name)| f == file && (name == "*" || name == function))
    });
    assert!(
        elsewhere.is_empty(),
        "waits outside labkit/src/eventually.rs:\n{}",
        elsewhere.join("\n")
    );
}

#[test]
fn the_poller_check_finds_a_loop_that_sleeps_or_ticks() {
    let planted = "async fn a() {\n\
                   let mut every = tokio::time::interval(D);\n\
                   loop { every.tick().await; if done() { break } }\n\
                   while !done() { std::thread::sleep(D) }\n\
                   for _ in 0..3 { tokio::select! { _ = sleep(D) => {} } }\n\
                   loop { if done(interval) { break } info!(sleep = 1) }\n\
                   }\n\
                   impl A { fn b() { loop { tokio::time::sleep(D).await } } }\n\
                   #[tokio::test(start_paused = true)]\n\
                   async fn c() { loop { sleep(D).await } }\n";
    let found: Vec<String> =
        timed_loops(planted).into_iter().map(|(l, w)| format!("{l}: {w}")).collect();
    assert_eq!(
        found,
        [
            "3: a: a loop on .tick()",
            "4: a: a loop on sleep",
            "5: a: a loop on sleep",
            "8: b: a loop on sleep"
        ]
    );
}
