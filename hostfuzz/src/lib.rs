//! Host fuzzing of the guest's portable crates (docs/host-fuzzing.md).
//!
//! - [`rng`]: the one seeded generator all input bytes come from.
//! - [`decisions`]: how a generator reads an input, as decisions.
//! - [`targets`]: the generators and the guest code they drive.
//! - [`kernel`]: the reference kernel's own files, compiled here through `#[path]`, and the
//!   physical memory they reach.
//! - [`machine`]: kernel tasks as threads, one at a time, the input deciding who runs.
//! - [`panics`]: a run's panic kept as its finding, not printed.
//! - [`exec`]: one input, in a fresh child or in process (tests), and the pipes a child answers on.
//! - [`zygote`]: the fork server, a process forked once that forks a child per input (the runner's way, [`zygote::served`]).
//! - [`arena`]: a served child's heap, on fresh pages of its own.
//! - [`cpu`]: one core for a run's runner, zygote and children.
//! - [`hugetext`]: the runner's code moved onto huge pages, so children take no fault on it.
//! - [`shrink`]: a finding's input made as small as it goes.
//! - [`runner`]: the gate, campaigns and replay behind `cargo hostfuzz`.
//! - [`mutations`]: `cargo hostfuzz --mutations`, the proof that each harness bites.

pub mod arena;
pub mod cpu;
pub mod decisions;
pub mod exec;
pub mod finding;
pub mod hex;
pub mod hugetext;
pub mod kernel;
pub mod machine;
pub mod mutations;
pub mod panics;
pub mod rng;
pub mod runner;
pub mod shrink;
pub mod slurm;
pub mod targets;
pub mod zygote;

pub use decisions::Decisions;
pub use finding::Finding;
pub use targets::RunFn;

/// Every allocation goes through the machine's watch, which reports one made with
/// interrupts off on a machine task's CPU.
#[global_allocator]
static ALLOCATOR: machine::Watch = machine::Watch;
