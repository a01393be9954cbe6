//! A `FilesGlob` source: which of its files comes next, and what it holds that will not be ingested.
//!
//! Files are ingested one per transaction in name order, after the last one ingested (ODF's `ByName`
//! order). A transaction takes the next file; one that finds none to take (the last of a pull) looks at every
//! file the glob matches and says what it does not ingest:
//!
//! - the first file after the last one ingested is **next**, unless it changed within the settle time (it
//!   may still be being written): then it is left for a later pull ([`SourceNotice::Unsettled`]), and so are
//!   the files after it, which must come after it;
//! - a file that sorts before the last one ingested and was never ingested is **late**
//!   ([`SourceNotice::Late`]): name order has passed it;
//! - a file ingested before whose size or modification time differs from what was recorded, and whose
//!   content hash differs too, **changed after it was ingested** ([`SourceNotice::ChangedAfterIngest`]).
//!
//! Late and changed files are never ingested silently nor ignored silently: each pull reports them with the
//! way to take them in, until they are dealt with. What an ingest recorded about each file is in its
//! `AddData` ([`IngestedFiles::from_adds`]): the source state (`weir/last-file`, the file's path) and the
//! file's size, modification time and hash ([`RecordedFile`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use weir_odf::{AddData, FetchStepFilesGlob, SourceState};

use crate::fetch::{FetchError, Fetched, STATE_LAST_FILE};
use crate::source_file::{FileSnapshot, FileStamp, RecordedFile, SnapshotError, hash_file};
use weir_dataset::progress::Progress;

/// The settle time when the workspace names none: a file changed more recently than this is left for a
/// later pull.
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(2);

/// The files a dataset's chain records as ingested, with what it recorded about each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestedFiles {
    /// The last file ingested.
    pub last: Option<String>,
    /// Every file ingested, with its record (`None` in chains written before Weir recorded files).
    pub files: BTreeMap<String, Option<RecordedFile>>,
}

impl IngestedFiles {
    /// From a chain's `AddData` events, oldest first.
    pub fn from_adds<'a>(adds: impl IntoIterator<Item = &'a AddData>) -> Self {
        let mut ingested = Self::default();
        for add in adds {
            let Some(state) = add
                .new_source_state
                .as_ref()
                .filter(|s| s.kind == STATE_LAST_FILE)
            else {
                continue;
            };
            let recorded = add
                .extra
                .as_ref()
                .and_then(RecordedFile::from_extra)
                .filter(|r| r.path == state.value);
            ingested.files.insert(state.value.clone(), recorded);
            ingested.last = Some(state.value.clone());
        }
        ingested
    }
}

/// A file the glob holds that this pull does not ingest, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum SourceNotice {
    /// The next file changed within the settle time, or while it was hashed: it may still be being written.
    Unsettled {
        /// The file.
        file: String,
        /// How long ago it last changed, in milliseconds (0 when it changed while it was hashed).
        quiet_millis: u64,
        /// The settle time, in milliseconds.
        settle_millis: u64,
    },
    /// A file that sorts before the last one ingested and was never ingested.
    Late {
        /// The file.
        file: String,
        /// The last file ingested.
        last: String,
    },
    /// A file whose content changed after it was ingested.
    ChangedAfterIngest {
        /// The file.
        file: String,
        /// What changed, in words.
        what: String,
        /// The last file ingested.
        last: String,
    },
}

impl SourceNotice {
    /// The file it is about.
    pub fn file(&self) -> &str {
        match self {
            Self::Unsettled { file, .. }
            | Self::Late { file, .. }
            | Self::ChangedAfterIngest { file, .. } => file,
        }
    }

    /// Its kind, as in JSON: `unsettled`, `late` or `changedAfterIngest`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unsettled { .. } => "unsettled",
            Self::Late { .. } => "late",
            Self::ChangedAfterIngest { .. } => "changedAfterIngest",
        }
    }
}

impl std::fmt::Display for SourceNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |ms: u64| ms as f64 / 1000.0;
        match self {
            Self::Unsettled {
                file,
                quiet_millis,
                settle_millis,
            } => write!(
                f,
                "{file} changed {:.1} s ago, within the settle time of {} s, and may still be being written: it is left for a later pull (the settle time is `source_settle_secs` in weir.yaml or `weir pull --settle-secs`)",
                secs(*quiet_millis),
                secs(*settle_millis)
            ),
            Self::Late { file, last } => write!(
                f,
                "{file} sorts before {last}, the last file ingested, and is not ingested (files are taken in name order): to take it in, rename it to sort after {last}, or reset the dataset (`weir reset`) and pull to ingest every file again"
            ),
            Self::ChangedAfterIngest { file, what, last } => write!(
                f,
                "{file} changed after it was ingested ({what}) and is not ingested again: to take in its new records, move them to a new file that sorts after {last}, or reset the dataset (`weir reset`) and pull to ingest every file as it is now"
            ),
        }
    }
}

/// The file a pull ingests next, with the snapshot it is read from.
#[derive(Debug, Clone)]
pub struct PendingFile {
    /// The file, its path and the source state to record once it is ingested.
    pub fetched: Fetched,
    /// Its stamp and hash before the read, to check after it ([`FileSnapshot::check_unchanged`]).
    pub snapshot: FileSnapshot,
}

impl PendingFile {
    /// The extra attributes of the `AddData` that ingests it: what it was when it was read.
    pub fn extra(&self) -> Option<weir_odf::ExtraAttributes> {
        self.snapshot.recorded().to_extra()
    }
}

/// What a glob holds for this pull: the next file, if any, and what is not ingested.
#[derive(Debug, Clone, Default)]
pub struct GlobScan {
    /// The file to ingest now.
    pub next: Option<PendingFile>,
    /// Files not ingested by this pull, in name order.
    pub notices: Vec<SourceNotice>,
}

/// Looks at every file `glob` matches under `root` and picks the next one to ingest, given what the chain
/// records as `ingested`; a file changed within `settle` of `now` is left for a later pull. When there is no
/// file to ingest now, the notices say what the glob holds that is not ingested. The next file is
/// stamped and hashed before it is handed out, reporting to `progress` (blocking: run it on a blocking
/// thread).
pub fn scan(
    root: &Path,
    glob: &FetchStepFilesGlob,
    ingested: &IngestedFiles,
    settle: Duration,
    now: SystemTime,
    progress: &Progress,
) -> Result<GlobScan, FetchError> {
    let err = |message: String| FetchError {
        what: glob.path.clone(),
        message,
    };
    // glob drops a leading `./` from what it yields, so a relative root (`--workspace .`) would never prefix
    // the matches: work from the absolute form.
    let root = &std::path::absolute(root).map_err(|e| err(e.to_string()))?;
    let pattern = root.join(&glob.path);
    let mut names: Vec<(String, PathBuf)> = glob::glob(&pattern.to_string_lossy())
        .map_err(|e| err(e.to_string()))?
        .filter_map(Result::ok)
        .filter(|p| p.is_file())
        .filter_map(|p| {
            let name = p.strip_prefix(root).ok()?.to_string_lossy().into_owned();
            Some((name, p))
        })
        .collect();
    names.sort();
    let mut scan = GlobScan::default();
    let last = ingested.last.as_deref();
    // The next file: the first never ingested that sorts after the last one ingested. The files after it
    // come after it, so while it settles they wait too.
    let next = names.iter().find(|(name, _)| {
        !ingested.files.contains_key(name) && last.is_none_or(|l| name.as_str() > l)
    });
    if let Some((name, path)) = next {
        let stamp = FileStamp::of(path).map_err(|e| err(format!("{name}: {e}")))?;
        let quiet = stamp.quiet_for(now);
        let unsettled = |quiet: Duration| SourceNotice::Unsettled {
            file: name.clone(),
            quiet_millis: millis(quiet),
            settle_millis: millis(settle),
        };
        if quiet < settle {
            scan.notices.push(unsettled(quiet));
        } else {
            match FileSnapshot::take_reporting(path, name, progress) {
                Ok(snapshot) => {
                    scan.next = Some(PendingFile {
                        fetched: Fetched {
                            name: name.clone(),
                            path: path.clone(),
                            size: snapshot.stamp.size,
                            state: SourceState {
                                source_name: SourceState::DEFAULT_SOURCE_NAME.into(),
                                kind: STATE_LAST_FILE.into(),
                                value: name.clone(),
                            },
                        },
                        snapshot,
                    });
                    // What the glob holds besides is looked at once the source has nothing more to take
                    // (the last transaction of a pull), not before every file.
                    return Ok(scan);
                }
                // It changes as it is hashed: still being written.
                Err(SnapshotError::Changed(_)) => scan.notices.push(unsettled(Duration::ZERO)),
                Err(e) => return Err(err(e.to_string())),
            }
        }
    }
    for (name, path) in &names {
        match ingested.files.get(name) {
            Some(Some(recorded)) => {
                if let Some(what) = changed_since(path, recorded) {
                    scan.notices.push(SourceNotice::ChangedAfterIngest {
                        file: name.clone(),
                        what,
                        last: last.unwrap_or_default().to_string(),
                    });
                }
            }
            Some(None) => {}
            None => {
                if let Some(last) = last.filter(|l| name.as_str() < *l) {
                    scan.notices.push(SourceNotice::Late {
                        file: name.clone(),
                        last: last.to_string(),
                    });
                }
            }
        }
    }
    scan.notices.sort_by(|a, b| a.file().cmp(b.file()));
    Ok(scan)
}

/// What changed in an ingested file since it was recorded, or `None` when it is the same (a file whose
/// size and modification time are as recorded is taken as unchanged; one whose modification time alone
/// moved is hashed). A file that cannot be read now is not reported: its removal is no change to report.
fn changed_since(path: &Path, recorded: &RecordedFile) -> Option<String> {
    let stamp = FileStamp::of(path).ok()?;
    if !recorded.differs(&stamp) {
        return None;
    }
    if stamp.size != recorded.size {
        return Some(format!(
            "it had {} bytes, now {}",
            recorded.size, stamp.size
        ));
    }
    let hash = hash_file(path).ok()?;
    (hash.to_string() != recorded.sha3_256).then(|| "same size, other content".to_string())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(path: &str) -> FetchStepFilesGlob {
        FetchStepFilesGlob {
            path: path.into(),
            event_time: None,
            cache: None,
            order: None,
        }
    }

    fn ingested(pending: &PendingFile, before: &IngestedFiles) -> IngestedFiles {
        let add = AddData {
            prev_checkpoint: None,
            prev_offset: None,
            new_data: None,
            new_checkpoint: None,
            new_watermark: None,
            new_source_state: Some(pending.fetched.state.clone()),
            extra: pending.extra(),
        };
        let mut after = before.clone();
        let one = IngestedFiles::from_adds([&add]);
        after.files.extend(one.files);
        after.last = one.last;
        after
    }

    #[test]
    fn files_come_in_name_order_and_late_and_changed_ones_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("in")).unwrap();
        for n in ["b.csv", "c.csv"] {
            std::fs::write(dir.path().join("in").join(n), n).unwrap();
        }
        let g = glob("in/*.csv");
        let now = SystemTime::now() + Duration::from_secs(60);
        let first = scan(
            dir.path(),
            &g,
            &IngestedFiles::default(),
            DEFAULT_SETTLE,
            now,
            &Progress::none(),
        )
        .unwrap();
        let b = first.next.unwrap();
        assert_eq!(b.fetched.name, "in/b.csv");
        assert!(first.notices.is_empty());
        let after_b = ingested(&b, &IngestedFiles::default());
        // A late file and a file changed after it was ingested.
        std::fs::write(dir.path().join("in/a.csv"), "a").unwrap();
        std::fs::write(dir.path().join("in/b.csv"), "b.csv and more").unwrap();
        let second = scan(
            dir.path(),
            &g,
            &after_b,
            DEFAULT_SETTLE,
            now,
            &Progress::none(),
        )
        .unwrap();
        let c = second.next.unwrap();
        assert_eq!(c.fetched.name, "in/c.csv");
        assert!(
            second.notices.is_empty(),
            "said when nothing is left to take"
        );
        let after_c = ingested(&c, &after_b);
        let third = scan(
            dir.path(),
            &g,
            &after_c,
            DEFAULT_SETTLE,
            now,
            &Progress::none(),
        )
        .unwrap();
        assert!(third.next.is_none());
        assert_eq!(
            third.notices,
            vec![
                SourceNotice::Late {
                    file: "in/a.csv".into(),
                    last: "in/c.csv".into()
                },
                SourceNotice::ChangedAfterIngest {
                    file: "in/b.csv".into(),
                    what: "it had 5 bytes, now 14".into(),
                    last: "in/c.csv".into()
                },
            ]
        );
    }

    #[test]
    fn a_file_changed_within_the_settle_time_waits_and_so_do_the_files_after_it() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["a.csv", "b.csv"] {
            std::fs::write(dir.path().join(n), n).unwrap();
        }
        let g = glob("*.csv");
        let s = scan(
            dir.path(),
            &g,
            &IngestedFiles::default(),
            Duration::from_secs(3600),
            SystemTime::now(),
            &Progress::none(),
        )
        .unwrap();
        assert!(s.next.is_none());
        assert_eq!(s.notices.len(), 1);
        assert_eq!(s.notices[0].file(), "a.csv");
        assert_eq!(s.notices[0].kind(), "unsettled");
    }

    #[test]
    fn a_file_touched_but_not_changed_is_not_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.csv");
        std::fs::write(&path, "a").unwrap();
        let g = glob("*.csv");
        let now = SystemTime::now() + Duration::from_secs(60);
        let a = scan(
            dir.path(),
            &g,
            &IngestedFiles::default(),
            DEFAULT_SETTLE,
            now,
            &Progress::none(),
        )
        .unwrap()
        .next
        .unwrap();
        let after = ingested(&a, &IngestedFiles::default());
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
        let s = scan(
            dir.path(),
            &g,
            &after,
            DEFAULT_SETTLE,
            now,
            &Progress::none(),
        )
        .unwrap();
        assert!(s.next.is_none());
        assert!(s.notices.is_empty(), "{:?}", s.notices);
    }

    #[test]
    fn a_glob_under_a_relative_root_starting_with_dot_finds_its_files() {
        // Tests run in the crate's folder: a temporary workspace inside it, named `./.tmpXXXX`.
        let dir = tempfile::tempdir_in(".").unwrap();
        let root = Path::new(".").join(dir.path().file_name().unwrap());
        std::fs::create_dir(root.join("in")).unwrap();
        std::fs::write(root.join("in").join("a.csv"), "a").unwrap();
        let now = SystemTime::now() + Duration::from_secs(60);
        let first = scan(
            &root,
            &glob("in/*.csv"),
            &IngestedFiles::default(),
            DEFAULT_SETTLE,
            now,
            &Progress::none(),
        )
        .unwrap();
        assert_eq!(
            first.next.map(|p| p.fetched.name).as_deref(),
            Some("in/a.csv")
        );
    }
}
