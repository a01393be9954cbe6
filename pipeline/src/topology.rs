//! What a running pipeline is made of (Broadway's `topology/1` and
//! `producer_names/1`), and which pipelines of the process are running
//! (Broadway's `all_running/0`).

use std::sync::{Arc, Mutex, MutexGuard};

use weir_gen_stage::{AnyStage, StageId};

use crate::StageRole;

/// A pipeline's stages by role: [`Pipeline::topology`](crate::Pipeline::topology).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Topology {
    /// The pipeline's name.
    pub name: String,
    /// Its producers (given or started, and the test producer), in the
    /// order they were added.
    pub producers: Vec<TopologyProducer>,
    /// Its processors.
    pub processors: TopologyProcessors,
    /// Its batchers, in the order they were added.
    pub batchers: Vec<TopologyBatcher>,
}

/// One producer of a [`Topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopologyProducer {
    /// `{pipeline}.Producer_{index}`, as Broadway names its producers.
    pub name: String,
    /// The producer's stage.
    pub stage: StageId,
}

/// The processors of a [`Topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopologyProcessors {
    /// `{pipeline}.Processor_default`, as Broadway's.
    pub name: String,
    /// How many.
    pub concurrency: usize,
    /// Their stages, by index.
    pub stages: Vec<StageId>,
}

/// One batcher of a [`Topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopologyBatcher {
    /// The batcher's name.
    pub batcher: String,
    /// `{pipeline}.Batcher_{batcher}`, as Broadway's.
    pub name: String,
    /// Its batch processors.
    pub concurrency: usize,
    /// Its stages (one, or one per partition).
    pub stages: Vec<StageId>,
    /// Its batch processors' stages, by index.
    pub batch_processors: Vec<StageId>,
}

impl Topology {
    /// Built from what the pipeline keeps: its producers, and every other
    /// stage's role.
    pub(crate) fn new<'a>(
        name: &str,
        producers: &[AnyStage],
        roles: impl Iterator<Item = (&'a StageRole, StageId)>,
    ) -> Self {
        let mut topology = Topology {
            name: name.to_owned(),
            producers: producers
                .iter()
                .enumerate()
                .map(|(index, stage)| TopologyProducer {
                    name: format!("{name}.Producer_{index}"),
                    stage: stage.id(),
                })
                .collect(),
            processors: TopologyProcessors {
                name: format!("{name}.Processor_default"),
                concurrency: 0,
                stages: Vec::new(),
            },
            batchers: Vec::new(),
        };
        for (role, stage) in roles {
            match role {
                StageRole::Processor { .. } => {
                    topology.processors.concurrency += 1;
                    topology.processors.stages.push(stage);
                }
                StageRole::Batcher { name: batcher, .. } => {
                    topology.batcher(name, batcher).stages.push(stage);
                }
                StageRole::BatchProcessor { batcher, .. } => {
                    let entry = topology.batcher(name, batcher);
                    entry.concurrency += 1;
                    entry.batch_processors.push(stage);
                }
            }
        }
        topology
    }

    fn batcher(&mut self, pipeline: &str, batcher: &str) -> &mut TopologyBatcher {
        let index = match self.batchers.iter().position(|b| b.batcher == batcher) {
            Some(index) => index,
            None => {
                self.batchers.push(TopologyBatcher {
                    batcher: batcher.to_owned(),
                    name: format!("{pipeline}.Batcher_{batcher}"),
                    concurrency: 0,
                    stages: Vec::new(),
                    batch_processors: Vec::new(),
                });
                self.batchers.len() - 1
            }
        };
        &mut self.batchers[index]
    }
}

/// Whether a pipeline is still running.
pub(crate) type Running = Arc<dyn Fn() -> bool + Send + Sync>;

/// Every pipeline started in this process: its name, and whether it runs.
static STARTED: Mutex<Vec<(Arc<str>, Running)>> = Mutex::new(Vec::new());

fn started() -> MutexGuard<'static, Vec<(Arc<str>, Running)>> {
    // Nothing panics while holding the lock: a poisoned list is whole.
    STARTED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A pipeline started: it counts as running until every stage has stopped
/// for good (stages started again count).
pub(crate) fn register(name: Arc<str>, running: Running) {
    let mut started = started();
    started.retain(|(_, running)| running());
    started.push((name, running));
}

/// The names of the pipelines of this process that are running (any of
/// their stages is alive), in the order they started (Broadway's
/// `all_running/0`). A name appears once per running pipeline of that name.
pub fn all_running() -> Vec<String> {
    let mut started = started();
    started.retain(|(_, running)| running());
    started.iter().map(|(name, _)| name.to_string()).collect()
}
