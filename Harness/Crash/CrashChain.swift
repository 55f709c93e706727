import HarnessSupport

/// The fixed chain every scenario crashes through, innermost last:
/// `crashChainLevel1` → `crashChainLevel2` → `crashChainLevel3` → the fault.
///
/// The harness asserts that the symbolicated stack of the report contains Level3, Level2 and
/// Level1 in that order. Each level is `@inline(never)`, uses the callee's result after the call
/// (so the call cannot become a tail call) and has a body of a different shape (so function
/// merging cannot fold two levels into one).

@inline(never)
func crashChainLevel1(_ scenario: Scenario, _ seed: Int) -> Int {
    let result = crashChainLevel2(scenario, seed &+ 1)
    return result &+ seed
}

@inline(never)
func crashChainLevel2(_ scenario: Scenario, _ seed: Int) -> Int {
    let result = crashChainLevel3(scenario, seed &* 3)
    return result ^ (seed << 1)
}

@inline(never)
func crashChainLevel3(_ scenario: Scenario, _ seed: Int) -> Int {
    let result = scenario.fault.trigger(seed ^ 0x5A)
    return result &- scenario.name.utf8.count
}
