//! The check that a Chinese output holds no English sentence, for the tests
//! that run the verbs speaking Chinese (`--lang zh`; [`crate::say`]). Test
//! support: compiled for tests and for crates whose tests turn on the
//! `test-support` feature.

/// Lowercase English words a Chinese text may use: the course's own jargon
/// (its Chinese pages say "resync", "hot loop", "key", "watch"…), the verbs
/// of the API (what a row counts), and the names of the tools and units.
/// Every other lowercase English word is a sentence that was not translated.
pub const JARGON: &[&str] = &[
    // The API's verbs and objects' parts, as the course says them.
    "add",
    "create",
    "update",
    "delete",
    "patch",
    "get",
    "list",
    "watch",
    "data",
    "label",
    "key",
    "uid",
    "generation",
    "immutable",
    // The course's words for a controller's parts.
    "controller",
    "informer",
    "worker",
    "reconcile",
    "resync",
    "hot",
    "loop",
    "dirty",
    "main",
    "ctx",
    "err",
    "info",
    "debug",
    // Tools, the labs' providers, and units after a number.
    "kubectl",
    "kubeconfig",
    "kubelet",
    "etcd",
    "containerd",
    "docker",
    "curl",
    "rustup",
    "rustc",
    "nix",
    "cc",
    "gcc",
    "git",
    "cgroup",
    "inotify",
    "libc",
    "musl",
    "minor",
    "cargo",
    "xtask",
    "go",
    "json",
    "yaml",
    "envtest",
    "kind",
    "ms",
    "s",
    "min",
];

/// What may stay English in a Chinese output, besides [`JARGON`].
#[derive(Clone, Copy, Default)]
pub struct Allowed<'a> {
    /// Labels whose line is a command (up to a `   # ` comment).
    pub commands_after: &'a [&'a str],
    /// Names a person types that are English words (`heal`, `rerun`).
    pub names: &'a [&'a str],
}

/// The lines of `text`, a Chinese output, that hold English words: words of
/// lowercase ASCII letters that are not [`JARGON`]. What may stay English is
/// left out first: a command line (`$ …`), the program's own output (a line
/// `  | …`), what `allowed` says, backticked spans, and words that are
/// identifiers or numbers — anything with a capital, a digit or one of
/// `_ / . : = - @ { } < > \ "` (`ConfigMap`, `SIGTERM`, `my-config`,
/// `app.conf`, `2s`).
pub fn english_in(text: &str, allowed: Allowed<'_>) -> Vec<String> {
    text.lines()
        .filter(|line| !english_words(line, allowed).is_empty())
        .map(str::to_string)
        .collect()
}

/// The English words of one line ([`english_in`]).
pub fn english_words(line: &str, allowed: Allowed<'_>) -> Vec<String> {
    if line.starts_with("  | ") {
        return Vec::new();
    }
    // A command as typed runs from its `$ ` to the end of the line.
    let mut rest = line.split_once("$ ").map_or(line, |(before, _)| before);
    if let Some(label) = allowed.commands_after.iter().find(|l| line.starts_with(*l)) {
        rest = line[label.len()..].split_once("   # ").map_or("", |(_, comment)| comment);
    }
    let mut prose = String::new();
    for (i, part) in rest.split('`').enumerate() {
        if i % 2 == 0 {
            prose.push_str(part);
            prose.push(' ');
        }
    }
    prose
        .split(|c: char| c.is_whitespace() || !c.is_ascii() || "(),;!?[]|'*#".contains(c))
        .filter(|word| !word.is_empty())
        .filter(|word| word.chars().all(|c| c.is_ascii_lowercase()))
        .filter(|word| !JARGON.contains(word) && !allowed.names.contains(word))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BY_HAND: Allowed<'static> =
        Allowed { commands_after: &["手动命令："], names: &["heal"] };

    #[test]
    fn an_untranslated_line_is_english() {
        for line in [
            "  the program's first request to the API server: ready after 0.5s",
            "  applied ServiceAccount default/my-controller-grade",
            "| 7 优雅退出 | 通过 | SIGINT：10 ms 后 exit 0；SIGTERM：killed by SIGTERM |",
            "error: interrupted: the program was stopped and the lab put back as it was",
            "starting the lab's own controller again",
            "手动命令：          kubectl delete configmap my-config   # in another terminal",
        ] {
            assert!(!english_words(line, BY_HAND).is_empty(), "{line}");
        }
    }

    #[test]
    fn chinese_with_commands_identifiers_and_units_is_not() {
        let text = "\
评分：`/x/my-controller --kubeconfig '{kubeconfig}'`，实验环境 d1lab（envtest，Kubernetes v1.36.3）
$ NO_COLOR=1 KUBECONFIG=/x/grade.kubeconfig /x/my-controller >>/x/program.log 2>&1 &
| 3 纠偏（实验 3） | 通过 | 把 app.conf 改成 env=dev → 9 ms 后被改回（1 次 update） |
| 6 没有 hot loop | 通过 | 运行了 9 s（每 1 s 一次 resync）：没有任何写；resourceVersion 250 没变 |
手动命令：          kubectl get configmap my-config -n default --watch   # 在另一个终端：看它消失又回来
  | 2026-12-04T15:42:02Z  INFO controller::reconcile: created ConfigMap with the desired data
== heal（课程实验 2）：删掉 my-config → 它带着期望的数据回来
注意：              signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)：收到信号后返回，退出码 0
";
        assert_eq!(english_in(text, BY_HAND), Vec::<String>::new());
    }
}
