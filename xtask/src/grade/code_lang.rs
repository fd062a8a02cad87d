//! Which language's way the hints show: the learner's language of code,
//! inferred from the command (`--hint-lang` says it instead).

use super::*;

/// A language of code the hints know, or all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CodeLang {
    Go,
    Rust,
    Python,
    /// Each hint in every language.
    #[default]
    All,
}

impl CodeLang {
    pub(super) const EACH: [CodeLang; 3] = [CodeLang::Go, CodeLang::Rust, CodeLang::Python];

    /// Its name, as `--hint-lang` takes it.
    pub(super) fn key(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    /// What `command` is written in: `go run`, `cargo run`, `python`, a
    /// source file's extension, a script's `#!` line, or what a compiler left
    /// in a binary (Go's build info, Rust's standard library paths); all when none says.
    /// Names first, over every word: a tool a command runs through (`env`, `timeout`)
    /// may itself be written in Rust.
    pub(super) fn of(command: &[String]) -> CodeLang {
        let inside =
            |word: &String| Some(Path::new(word)).filter(|p| p.is_file()).and_then(Self::inside);
        command
            .iter()
            .find_map(|word| Self::named(word))
            .or_else(|| command.iter().find_map(inside))
            .unwrap_or(CodeLang::All)
    }

    fn named(word: &str) -> Option<CodeLang> {
        let path = Path::new(word);
        let name = path.file_name()?.to_str()?;
        match name {
            "go" => Some(CodeLang::Go),
            "cargo" | "rustc" => Some(CodeLang::Rust),
            name if name.starts_with("python") => Some(CodeLang::Python),
            _ => match path.extension().and_then(|e| e.to_str()) {
                Some("go") => Some(CodeLang::Go),
                Some("rs") => Some(CodeLang::Rust),
                Some("py") => Some(CodeLang::Python),
                _ => None,
            },
        }
    }

    /// What a file says of itself.
    fn inside(path: &Path) -> Option<CodeLang> {
        let bytes = std::fs::read(path).ok()?;
        let has = |needle: &[u8]| memchr::memmem::find(&bytes, needle).is_some();
        if bytes.starts_with(b"#!") {
            let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
            let python = line.windows(6).any(|w| w == b"python");
            return python.then_some(CodeLang::Python);
        }
        // Rust's paths first: a Rust binary may hold Go's marker as data (this one does).
        if has(b"/rustc/") {
            Some(CodeLang::Rust)
        } else if has(b"\xff Go buildinf:") {
            Some(CodeLang::Go)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(words: &[&str]) -> CodeLang {
        CodeLang::of(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_command_says_its_language() {
        assert_eq!(of(&["go", "run", ".", "-kubeconfig", "{kubeconfig}"]), CodeLang::Go);
        assert_eq!(of(&["go", "run", "main.go"]), CodeLang::Go);
        assert_eq!(of(&["cargo", "run", "-q", "--"]), CodeLang::Rust);
        assert_eq!(of(&["/usr/bin/python3", "controller.py"]), CodeLang::Python);
        assert_eq!(of(&["uv", "run", "controller.py"]), CodeLang::Python);
        assert_eq!(of(&["sh", "-c", "exec \"$0\"", "no/such/file"]), CodeLang::All);
        // A Rust-written tool before the program does not make it Rust.
        let tool = std::env::current_exe().unwrap().display().to_string();
        assert_eq!(of(&[&tool, "60", "./ctl.py"]), CodeLang::Python);
    }

    #[test]
    fn a_file_says_its_language_inside() {
        let dir = std::env::temp_dir().join(format!("grade-code-lang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            path.display().to_string()
        };
        let go = file("go-bin", b"\x7fELF..\xff Go buildinf:\x08\x02");
        let rust = file("rust-bin", b"\x7fELF../rustc/4a3b/library/core/src/panicking.rs");
        let python = file("ctl", b"#!/usr/bin/env python3\nimport kubernetes\n");
        let shell = file("ctl.sh-less", b"#!/bin/sh\nexec python3 x\n");
        assert_eq!(of(&[&go]), CodeLang::Go);
        assert_eq!(of(&["sh", "-c", "exec \"$0\"", &rust]), CodeLang::Rust);
        assert_eq!(of(&[&python]), CodeLang::Python);
        assert_eq!(of(&[&shell]), CodeLang::All);
        // The kit's own controller, built: a Rust binary.
        let own = std::env::current_exe().unwrap().display().to_string();
        assert_eq!(of(&[&own]), CodeLang::Rust);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
