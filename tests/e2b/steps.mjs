// steps.mjs - the frame every SDK script of this directory shares: named
// steps whose results (or what the SDK threw) go into one summary, which the
// script prints as its last line for tests/integration/test_e2b.py to
// assert on, and the ids of the sandboxes it made ("created"), which the
// test removes through nanobox's own API even when the script failed.
//
//   const { steps, created, summary, step, throws } = suite((e) => errInfo(e))
//
// errInfo is the script's own picture of an error (what it needs of it).

export function suite (errInfo) {
  const steps = {}
  const created = []
  const ms = {}
  const summary = { steps, created, ms }
  // one step: its result, or what it threw; ms[name] its time
  async function step (name, fn) {
    const t0 = Date.now()
    try {
      steps[name] = (await fn()) ?? {}
    } catch (e) {
      steps[name] = { thrown: errInfo(e) }
    }
    ms[name] = Date.now() - t0
  }
  // a step that must throw: what it threw, or {returned} if it did not
  async function throws (name, fn) {
    const t0 = Date.now()
    try {
      steps[name] = { returned: (await fn()) ?? null }
    } catch (e) {
      steps[name] = errInfo(e)
    }
    ms[name] = Date.now() - t0
  }
  return { steps, created, summary, step, throws }
}
