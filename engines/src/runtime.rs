//! Engines behind the engine contract (gRPC), started by `engine-runtime`: a local process, or a Docker or
//! Podman container pinned by image digest.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use weir_engine_contract::ClientError;
use weir_engine_runtime::EngineEnvironment;
use weir_engine_runtime::{
    ContainerEngine, ContainerRuntime, DaemonSocket, DockerDaemon, EngineEndpoint, EngineRuntime,
    OperationFolders, OperationId, ProcessEndpoint, ProcessEngine, ProcessRuntime, RuntimeConfig,
    RuntimeError, StartRequest,
};

use super::contract::ContractViolation;
use super::exchange::ObjectExchange;
use super::job::{
    InputRecords, MigrateJob, MigrateReport, ProvenanceJob, RawQueryJob, TransformJob,
    TransformReport, ValidateJob, ValidateReport, output_dir,
};
use super::{Engine, EngineFailure, EngineFuture};
use weir_dataset::progress::Progress;
use weir_engine_contract::conformance::ConformanceReport;

/// The longest an engine may take to start listening: a minute, or the whole deadline when that is less.
pub const START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The outer limit of one operation of a runtime engine. The runtime itself times the engine's start and
/// its operation (so an engine that never listens is reported as that); this limit only catches what it
/// would not.
pub fn outer_limit(deadline: std::time::Duration) -> std::time::Duration {
    deadline + START_TIMEOUT + std::time::Duration::from_secs(30)
}

/// The runtime's limits for one engine: the operation deadline, and the start timeout within it (an engine
/// that never listens is reported as such, not as a deadline).
fn runtime_config(deadline: std::time::Duration) -> RuntimeConfig {
    RuntimeConfig::default()
        .with_operation_deadline(deadline)
        .with_start_timeout(START_TIMEOUT.min(deadline))
}

/// How to get the runtime.
#[derive(Debug, Clone)]
enum Source {
    /// Ready (process engines).
    Ready(Arc<dyn EngineRuntime>),
    /// A container runtime, connected to the daemon per operation.
    Container {
        socket: DaemonSocket,
        image: String,
        endpoint: EngineEndpoint,
        config: RuntimeConfig,
    },
}

/// An engine started per operation by an engine runtime.
#[derive(Debug, Clone)]
pub struct RuntimeEngine {
    name: String,
    source: Source,
    /// `exchange: object-store`: transforms read and write the store themselves.
    exchange: Option<ObjectExchange>,
}

impl RuntimeEngine {
    /// A local engine binary: served on a Unix socket Weir names (`--unix-socket PATH`), or, with `port`,
    /// started with `args` alone and reached on 127.0.0.1:`port` (an engine that speaks TCP only).
    pub fn process(
        name: &str,
        binary: &Path,
        port: Option<u16>,
        args: &[String],
        deadline: std::time::Duration,
    ) -> Self {
        let config = runtime_config(deadline);
        let mut engine = ProcessEngine::new(name, binary).with_args(args.iter().cloned());
        if let Some(port) = port {
            engine = engine.with_endpoint(ProcessEndpoint::Tcp { port });
        }
        let runtime = ProcessRuntime::new(engine, config);
        Self {
            name: name.to_string(),
            source: Source::Ready(Arc::new(runtime)),
            exchange: None,
        }
    }

    /// Gives transforms whose job names objects ([`TransformJob::objects`]) the environment `exchange`
    /// makes for them.
    #[must_use]
    pub fn with_exchange(mut self, exchange: ObjectExchange) -> Self {
        self.exchange = Some(exchange);
        self
    }

    /// A container image pinned by digest, on Docker or Podman, served on a Unix socket, or on TCP `port`.
    pub fn container(
        name: &str,
        podman: bool,
        image: &str,
        port: Option<u16>,
        deadline: std::time::Duration,
    ) -> Self {
        let socket = if podman {
            ["/run/podman/podman.sock", "/var/run/podman/podman.sock"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
                .map_or(DaemonSocket::Auto, DaemonSocket::Unix)
        } else {
            DaemonSocket::Auto
        };
        // Weir engine images serve on a Unix socket in a mounted run folder, so their container has no
        // network at all; only an image that speaks TCP alone (`port:` in weir.yaml) joins a network.
        let endpoint = match port {
            Some(port) => EngineEndpoint::Tcp { port },
            None => EngineEndpoint::UnixSocket,
        };
        let config = runtime_config(deadline);
        Self {
            name: name.to_string(),
            source: Source::Container {
                socket,
                image: image.to_string(),
                endpoint,
                config,
            },
            exchange: None,
        }
    }

    async fn runtime(&self, engine: &str) -> Result<Arc<dyn EngineRuntime>, EngineFailure> {
        match &self.source {
            Source::Ready(r) => Ok(r.clone()),
            Source::Container {
                socket,
                image,
                endpoint,
                config,
            } => {
                let daemon = DockerDaemon::connect(socket)
                    .await
                    .map_err(|e| failure(engine, e))?;
                let container =
                    ContainerEngine::new(engine, image.as_str()).with_endpoint(*endpoint);
                Ok(Arc::new(ContainerRuntime::new(daemon, container, *config)))
            }
        }
    }

    /// Starts the engine for one operation: `inputs` (files) are mounted read-only one by one, `output` is
    /// its only writable folder.
    ///
    /// A container sees each input at `/opt/engine/in/<file name>`, so mounting the folders holding the
    /// inputs would clash as soon as two datasets are read (every dataset keeps its slices in a folder
    /// named `data`) and would show the engine more than it needs. The coordinator's inputs are named by
    /// the multihash of their bytes, so two paths with the same file name hold the same bytes: one mount
    /// serves both (see [`Started::engine_path`]).
    async fn start(
        &self,
        engine: &str,
        inputs: &[PathBuf],
        output: &Path,
        environment: EngineEnvironment,
    ) -> Result<Started, EngineFailure> {
        let mut folders = OperationFolders::new(output);
        let mut mounted: BTreeMap<OsString, PathBuf> = BTreeMap::new();
        let mut same_as = HashMap::new();
        for input in inputs {
            let Some(name) = input.file_name() else {
                continue;
            };
            match mounted.get(name) {
                Some(first) => {
                    if first != input {
                        same_as.insert(input.clone(), first.clone());
                    }
                }
                None => {
                    mounted.insert(name.to_os_string(), input.clone());
                    folders = folders.with_input(input);
                }
            }
        }
        let handle = self
            .runtime(engine)
            .await?
            .start(
                StartRequest::new(OperationId::generate(), folders).with_environment(environment),
            )
            .await
            .map_err(|e| failure(engine, e))?;
        Ok(Started {
            engine: engine.to_string(),
            handle,
            same_as,
        })
    }

    /// Starts the engine for one operation reading `inputs` and writing into `out_dir`, runs `call` on it
    /// with the request `request` builds from the engine's view of the paths, and stops it.
    async fn operation<R, T, F>(
        &self,
        inputs: &[PathBuf],
        out_dir: &Path,
        request: impl FnOnce(
            &dyn Fn(&Path) -> Result<String, EngineFailure>,
        ) -> Result<R, EngineFailure>,
        call: impl FnOnce(weir_engine_runtime::EngineHandle, R) -> F,
    ) -> Result<T, EngineFailure>
    where
        F: Future<Output = (weir_engine_runtime::EngineHandle, Result<T, RuntimeError>)>,
    {
        self.operation_with(inputs, out_dir, EngineEnvironment::default(), request, call)
            .await
    }

    /// [`Self::operation`] with variables set in the engine's environment.
    async fn operation_with<R, T, F>(
        &self,
        inputs: &[PathBuf],
        out_dir: &Path,
        environment: EngineEnvironment,
        request: impl FnOnce(
            &dyn Fn(&Path) -> Result<String, EngineFailure>,
        ) -> Result<R, EngineFailure>,
        call: impl FnOnce(weir_engine_runtime::EngineHandle, R) -> F,
    ) -> Result<T, EngineFailure>
    where
        F: Future<Output = (weir_engine_runtime::EngineHandle, Result<T, RuntimeError>)>,
    {
        let started = self.start(&self.name, inputs, out_dir, environment).await?;
        let request = request(&|p| started.engine_path(p))?;
        let Started { handle, .. } = started;
        let (handle, result) = call(handle, request).await;
        let _ = handle.stop().await;
        result.map_err(|e| failure(&self.name, e))
    }
}

use std::future::Future;

impl Engine for RuntimeEngine {
    fn transform<'a>(
        &'a self,
        job: &'a TransformJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, TransformReport> {
        Box::pin(async move {
            let total = Some(job.input_records());
            let environment = match (&job.objects, &self.exchange) {
                (None, _) => EngineEnvironment::default(),
                (Some(objects), Some(exchange)) => {
                    exchange
                        .environment(&self.name, objects, &job.dataset_alias)
                        .await?
                }
                (Some(_), None) => {
                    return Err(EngineFailure::NotConfigured {
                        engine: self.name.clone(),
                        runtime: "process".into(),
                        hint:
                            "the job names objects but the engine has no `exchange: object-store`"
                                .into(),
                    });
                }
            };
            let success = self
                .operation_with(
                    &job.input_files(),
                    &job.output_dir(),
                    environment,
                    |path| job.request(path),
                    |handle, request| async move {
                        let r = handle
                            .execute_transform(&request, |p| {
                                progress.engine(
                                    p.phase.as_deref(),
                                    p.rows_read,
                                    p.rows_written,
                                    total,
                                )
                            })
                            .await;
                        (handle, r)
                    },
                )
                .await;
            if let Some(objects) = &job.objects {
                // On success the objects stay for the store to copy; the transaction removes them.
                let fetched = match &success {
                    Ok(_) => {
                        objects
                            .fetch_outputs(&job.new_data_path, &job.new_checkpoint_path)
                            .await
                    }
                    Err(_) => Ok(()),
                };
                if success.is_err() || fetched.is_err() {
                    objects.remove_outputs().await;
                }
                fetched.map_err(|message| EngineFailure::Output {
                    engine: self.name.clone(),
                    message,
                })?;
            }
            Ok(success?.into())
        })
    }

    fn raw_query<'a>(
        &'a self,
        job: &'a RawQueryJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, u64> {
        Box::pin(async move {
            let success = self
                .operation(
                    &job.input_data_paths,
                    &output_dir(&job.output_data_path),
                    |path| job.request(path),
                    |handle, request| async move {
                        let r = handle
                            .execute_raw_query(&request, |p| {
                                progress.engine(
                                    p.phase.as_deref(),
                                    p.rows_read,
                                    p.rows_written,
                                    None,
                                )
                            })
                            .await;
                        (handle, r)
                    },
                )
                .await?;
            Ok(success.num_records)
        })
    }

    fn validate_query<'a>(&'a self, job: &'a ValidateJob) -> EngineFuture<'a, ValidateReport> {
        Box::pin(async move {
            let success = self
                .operation(
                    &job.input_files(),
                    &output_dir(&job.output_schema_path),
                    |path| job.request(path),
                    |handle, request| async move {
                        let r = handle
                            .call(|client| async move {
                                client
                                    .validate_query(&request)
                                    .await?
                                    .finish_with(|_| {})
                                    .await
                            })
                            .await;
                        (handle, r)
                    },
                )
                .await?;
            Ok(success.into())
        })
    }

    fn migrate_query<'a>(
        &'a self,
        job: &'a MigrateJob,
        progress: &'a Progress,
    ) -> EngineFuture<'a, MigrateReport> {
        Box::pin(async move {
            let success = self
                .operation(
                    &job.input_files(),
                    &output_dir(&job.new_data_path),
                    |path| job.request(path),
                    |handle, request| async move {
                        let r = handle
                            .call(|client| async move {
                                client
                                    .migrate_query(&request)
                                    .await?
                                    .finish_with(|p| {
                                        progress.engine(
                                            p.phase.as_deref(),
                                            p.rows_read,
                                            p.rows_written,
                                            None,
                                        )
                                    })
                                    .await
                            })
                            .await;
                        (handle, r)
                    },
                )
                .await?;
            Ok(success.into())
        })
    }

    fn derive_provenance<'a>(
        &'a self,
        job: &'a ProvenanceJob,
    ) -> EngineFuture<'a, Vec<InputRecords>> {
        Box::pin(async move {
            let scratch = job.step.output_dir();
            let success = self
                .operation(
                    &job.step.input_files(),
                    &scratch,
                    |path| job.request(path),
                    |handle, request| async move {
                        let r = handle
                            .call(|client| async move {
                                client
                                    .derive_provenance(&request)
                                    .await?
                                    .finish_with(|_| {})
                                    .await
                            })
                            .await;
                        (handle, r)
                    },
                )
                .await?;
            Ok(super::job::input_records(success))
        })
    }

    /// Starts the engine and runs the engine-contract conformance kit against it, with data checks in `dir`.
    fn conformance<'a>(&'a self, dir: &'a Path) -> EngineFuture<'a, ConformanceReport> {
        Box::pin(async move {
            let engine = self.name.as_str();
            let Started { handle, .. } = self
                .start(engine, &[], dir, EngineEnvironment::default())
                .await?;
            let engine_dir = handle.engine_path(dir).map_err(|e| failure(engine, e))?;
            let address = handle.client().address().clone();
            let options = weir_engine_contract::conformance::ConformanceOptions::new(engine)
                .with_data(weir_engine_contract::conformance::DataSetup {
                    fixtures: Arc::new(weir_engine_conformance::ParquetFixtures),
                    host_dir: dir.to_path_buf(),
                    engine_dir,
                });
            let report = weir_engine_contract::conformance::run(&address, &options).await;
            let _ = handle.stop().await;
            report.map_err(|e| EngineFailure::Internal {
                engine: engine.to_string(),
                message: chain_text(&e),
            })
        })
    }
}

/// A started engine and how it sees the operation's files.
struct Started {
    engine: String,
    handle: weir_engine_runtime::EngineHandle,
    /// Inputs not mounted themselves, and the mounted input with the same name (and bytes).
    same_as: HashMap<PathBuf, PathBuf>,
}

impl Started {
    /// The path the engine sees for the host path `p`.
    fn engine_path(&self, p: &Path) -> Result<String, EngineFailure> {
        let p = self.same_as.get(p).map_or(p, PathBuf::as_path);
        self.handle
            .engine_path(p)
            .map(|p| p.to_string_lossy().into_owned())
            .map_err(|e| failure(&self.engine, e))
    }
}

fn chain_text(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// Maps a runtime error to what the coordinator reports: the user's SQL, a contract breach, or a failure.
fn failure(engine: &str, e: RuntimeError) -> EngineFailure {
    let engine = engine.to_string();
    let contract = |violation| EngineFailure::Contract {
        engine: engine.clone(),
        violation,
    };
    match &e {
        RuntimeError::DeadlineExceeded { deadline, .. } => {
            return contract(ContractViolation::DeadlineExceeded {
                seconds: deadline.as_secs(),
            });
        }
        RuntimeError::Engine { source, .. } => match source.as_ref() {
            ClientError::InvalidQuery { message, .. } => {
                return EngineFailure::InvalidQuery {
                    engine,
                    message: message.clone(),
                };
            }
            ClientError::OperationNotSupported { operation, .. } => {
                return EngineFailure::NotSupported {
                    engine,
                    operation: operation.to_string(),
                };
            }
            ClientError::NoTerminalMessage { .. } => {
                return contract(ContractViolation::NoTerminalMessage);
            }
            ClientError::MessageAfterTerminal { .. } => {
                return contract(ContractViolation::TwoTerminalMessages);
            }
            ClientError::DeadlineExceeded { deadline, .. } => {
                return contract(ContractViolation::DeadlineExceeded {
                    seconds: deadline.as_secs(),
                });
            }
            _ => {}
        },
        _ => {}
    }
    EngineFailure::Internal {
        engine,
        message: chain_text(&e),
    }
}
