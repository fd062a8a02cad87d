//! Shutdown is bounded by `--shutdown-grace` whatever a client of the probe
//! port does: the real binary, its API server unreachable (it waits for it
//! and never exits for that), a request half-sent on `--listen`, SIGTERM.

mod common;

use backon::{BlockingRetryable as _, ExponentialBuilder};
use common::unreachable_kubeconfig;
use std::{
    io::{Read, Write},
    net::TcpStream,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

/// The grace given; the bound is this plus a second.
const GRACE: Duration = Duration::from_secs(2);
/// How long the binary may take to listen.
const STARTS_WITHIN: Duration = Duration::from_secs(30);

/// The controller under test, its stderr collected as it comes.
struct Controller {
    child: Child,
    listen: String,
    log: Arc<Mutex<String>>,
}

impl Controller {
    fn start(grace: Duration) -> Controller {
        let dir = std::env::temp_dir().join(format!("shutdown-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let listen = format!("127.0.0.1:{}", free_port());
        let grace = format!("{}ms", grace.as_millis());
        let mut child = Command::new(env!("CARGO_BIN_EXE_my-controller"))
            .args(["--kubeconfig", unreachable_kubeconfig(&dir).to_str().unwrap()])
            .args(["--listen", &listen, "--shutdown-grace", &grace])
            .env_remove("KUBECONFIG")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary runs");
        let log = Arc::new(Mutex::new(String::new()));
        let (mut stderr, collected) = (child.stderr.take().unwrap(), log.clone());
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut chunk) {
                collected.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        Controller { child, listen, log }
    }

    /// A new connection on the probe port holding its first request
    /// half-sent: hyper's graceful shutdown waits for that request to end.
    fn half_sent_request(&mut self) -> TcpStream {
        self.answers("/healthz");
        let mut held = TcpStream::connect(&self.listen).unwrap();
        held.write_all(b"GET /readyz HTTP/1.1\r\nHost: pro").unwrap();
        // Connections are accepted in order: once a later one is answered,
        // the server holds this one.
        self.answers("/healthz");
        held
    }

    /// Waits until `path` answers 200 on a connection of its own.
    fn answers(&mut self, path: &str) {
        let (child, listen) = (&mut self.child, &self.listen);
        let connected = poll(STARTS_WITHIN, || match TcpStream::connect(listen) {
            Ok(stream) => Ok(stream),
            Err(e) => match child.try_wait().unwrap() {
                None => Err(Seen::Again(format!("not listening on {listen}: {e}"))),
                Some(status) => Err(Seen::Over(format!("exited ({status}) before listening"))),
            },
        });
        let mut stream = connected.unwrap_or_else(|seen| panic!("{seen}:\n{}", self.log()));
        stream.set_read_timeout(Some(STARTS_WITHIN)).unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
    }

    fn signal(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on our own unreaped child.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    }

    /// Its exit status and when it came after `since`; `None` past `within`
    /// (the process is then killed).
    fn exit(&mut self, since: Instant, within: Duration) -> Option<(ExitStatus, Duration)> {
        let left = within.saturating_sub(since.elapsed());
        let child = &mut self.child;
        let exited = poll(left, || match child.try_wait().unwrap() {
            Some(status) => Ok((status, since.elapsed())),
            None => Err(Seen::Again("running".into())),
        });
        if exited.is_err() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        exited.ok()
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the log contains `line`.
    fn wait_for_line(&mut self, line: &str) {
        let found = poll(STARTS_WITHIN, || match self.log().contains(line) {
            true => Ok(()),
            false => Err(Seen::Again(format!("no {line:?}"))),
        });
        found.unwrap_or_else(|seen| panic!("{seen} in:\n{}", self.log()));
    }
}

/// What a look saw: worth another (`Again`), or an end to the wait (`Over`).
#[derive(Debug)]
enum Seen {
    Again(String),
    Over(String),
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seen::Again(s) | Seen::Over(s) => f.write_str(s),
        }
    }
}

/// Looks with growing gaps until `probe` is `Ok`, it says `Over`, or
/// `within` has passed (the last look's `Err`). backon's blocking retry:
/// the controller's own tests cannot use the kit's poller, which depends on it.
fn poll<T>(within: Duration, probe: impl FnMut() -> Result<T, Seen>) -> Result<T, Seen> {
    let started = Instant::now();
    let gaps = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(5))
        .with_max_delay(Duration::from_millis(100))
        .without_max_times();
    probe
        .retry(gaps)
        .when(|seen| matches!(seen, Seen::Again(_)) && started.elapsed() < within)
        .call()
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_half_sent_request_does_not_hold_the_exit_past_the_grace() {
    let mut controller = Controller::start(GRACE);
    let _held = controller.half_sent_request();
    let signalled = Instant::now();
    controller.signal();
    let bound = GRACE + Duration::from_secs(1);
    let exit = controller.exit(signalled, bound + Duration::from_secs(10));
    let log = controller.log();
    let Some((status, took)) = exit else {
        panic!("still running {:?} after SIGTERM (grace {GRACE:?}):\n{log}", signalled.elapsed())
    };
    assert!(took <= bound, "exited {took:?} after SIGTERM (bound: {bound:?}):\n{log}");
    // The grace ran out on the open request: named, and the status says so.
    assert_eq!(status.code(), Some(1), "{log}");
    let named = format!("cut off a request still open on {}", controller.listen);
    assert!(log.contains(&named), "{log}");
}

#[test]
fn a_second_signal_ends_the_wait_for_a_half_sent_request_at_once() {
    let mut controller = Controller::start(Duration::from_secs(60));
    let _held = controller.half_sent_request();
    controller.signal();
    controller.wait_for_line("shutting down");
    let signalled = Instant::now();
    controller.signal();
    let exit = controller.exit(signalled, Duration::from_secs(10));
    let log = controller.log();
    let Some((status, took)) = exit else { panic!("still running after two signals:\n{log}") };
    assert!(took <= Duration::from_secs(1), "exited {took:?} after the second signal:\n{log}");
    assert_eq!(status.code(), Some(130), "{log}");
}

/// A port nothing listens on now (the kernel's pick, released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
