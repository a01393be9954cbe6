//! Exit codes of the `weir` binary.

/// Success.
pub const OK: u8 = 0;
/// An unexpected failure.
pub const FAILURE: u8 = 1;
/// Bad command line (clap's own code).
pub const USAGE: u8 = 2;
/// The workspace or a manifest is invalid.
pub const INVALID_WORKSPACE: u8 = 3;
/// A named dataset or engine does not exist.
pub const NOT_FOUND: u8 = 4;
/// An engine rejected a query (InvalidQuery): fix the SQL.
pub const INVALID_QUERY: u8 = 5;
/// An engine failed or broke the engine contract; the dataset stayed at its previous head.
pub const ENGINE_FAILED: u8 = 6;
/// `verify` / `engine deprecate` found a mismatch.
pub const MISMATCH: u8 = 7;
/// Stored data is unreadable or a chain is invalid.
pub const STORAGE: u8 = 8;
/// Another `weir` process is writing the workspace (the workspace lock is held).
pub const LOCKED: u8 = 9;
/// Ingest refused a source file's data (the message names the file, line and column); nothing was committed.
pub const BAD_DATA: u8 = 10;
/// Refused: a changed query that cannot continue the recorded one, or a reset, rename or delete that
/// would break a dataset depending on this one. Nothing was changed.
pub const REFUSED: u8 = 11;
/// Stopped by SIGINT (Ctrl-C): 128 + 2, as shells report it. Engines stopped, scratch removed.
pub const INTERRUPTED: u8 = 130;
/// Stopped by SIGTERM: 128 + 15. Engines stopped, scratch removed.
pub const TERMINATED: u8 = 143;

/// The table printed by `weir --help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success
  1  unexpected failure
  2  bad command line (also `reset --to` naming several blocks)
  3  invalid workspace or manifest (the message names file:line:column and the field)
  4  unknown dataset, engine or block (`reset --to`)
  5  an engine rejected a query (InvalidQuery, with the engine's SQL error)
  6  an engine failed or broke the contract (the dataset keeps its previous head)
  7  verify / engine deprecate found a mismatch
  8  storage unreadable, a stored file missing or not matching its hash, a lost head, or a metadata chain
     invalid (verify reports every stored file that fails its check this way)
  9  the workspace is locked: another weir process is writing it (pull, ingest, engine deprecate, upgrade); pass
     --wait-lock to wait for it instead
 10  input data refused: the message names the file, line and column, or says the file changed while it
     was read (nothing was committed)
 11  refused: a changed transform that cannot continue the recorded one (see `pull --recompute`), a
     reset, rename or delete that datasets depending on it would not survive, a delete not confirmed
     (-y), or `init` in a workspace (nothing was changed)
130  stopped by SIGINT (Ctrl-C), 143 stopped by SIGTERM: transactions in flight are abandoned (their
     datasets keep their previous head), engine processes and containers are stopped and removed, and
     scratch folders removed

With --format json every command writes exactly one JSON document on stdout, whatever its outcome; a
failure's has \"error\", \"causes\", \"hint\" and \"exitCode\" (and a failed pull each dataset's outcome).
Logs and progress go to stderr.";
