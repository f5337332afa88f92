//! Running a source gate (crates/gates) as a case: the findings, one per line, are the
//! failure's reason, so a self-check's `must_fail` can match one of them.

use std::path::Path;
use std::time::Duration;

use testbench_case::Gate;
use testbench_gates::{deadlines, docs, formatting, import_cycles, nocruft, size_budget, unsafe_budget, vendor};

use crate::case_result::Blocked;

/// Listing a workspace's tests for the docs checker builds them; this only catches a hang.
const TEST_LIST_DEADLINE: Duration = Duration::from_secs(1800);

pub fn run(gate: Gate, tree: &Path, config: &Path, log: &mut dyn FnMut(&str)) -> Result<Vec<String>, Blocked> {
    let config_error = |e: testbench_gates::ConfigError| Blocked::Build(format!("{} configuration: {e}", gate.name()));
    let findings = match gate {
        Gate::UnsafeBudget => unsafe_budget::check(tree, config).map_err(config_error)?,
        Gate::SizeBudget => size_budget::check(tree, config).map_err(config_error)?,
        Gate::NoCruft => nocruft::check(tree, config).map_err(config_error)?,
        Gate::Formatting => formatting::check(tree, config).map_err(config_error)?,
        Gate::Vendor => vendor::check(tree),
        Gate::ImportCycles => import_cycles::check(tree, config).map_err(config_error)?,
        Gate::Deadlines => deadlines::check(tree, config).map_err(config_error)?,
        Gate::Docs => {
            log(&format!("docs: listing the tests the book names under {}", tree.display()));
            let packages = docs::packages_named(tree, config);
            let index = docs::TestIndex::from_cargo(tree, &packages, TEST_LIST_DEADLINE)
                .map_err(|e| Blocked::Build(format!("docs: failed to list the tests: {e}")))?;
            docs::check(tree, config, &index)
        }
    };
    Ok(findings.iter().map(|f| f.to_string()).collect())
}
