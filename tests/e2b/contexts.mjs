// contexts.mjs - code contexts and env vars through the official
// @e2b/code-interpreter SDK (pinned in package.json), as E2B's own tests
// use them: each createCodeContext makes a new context, listed last, with
// the options it was given; the sandbox's envs reach every language; a
// run's envs override them for that run only.
// tests/integration/test_e2b.py runs it and asserts on the JSON summary
// it prints as its last line: one entry per step, {"thrown": ...} when the
// SDK threw where it should not have.
//
//   node contexts.mjs --tag <unique tag>
import { Sandbox } from '@e2b/code-interpreter'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { created, summary, step, throws } = suite((e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) }))

const s = await Sandbox.create({ metadata: { suite: tag }, envs: { TEST_ENV_VAR: 'supertest' }, timeoutMs: 300_000 })
created.push(s.sandboxId)
summary.codeSandbox = s.sandboxId

const last = async () => (await s.listCodeContexts()).at(-1)
await step('createNoOptions', async () => {
  const ctx = await s.createCodeContext()
  return { ctx, last: await last() }
})
await step('createWithOptions', async () => {
  const ctx = await s.createCodeContext({ language: 'python', cwd: '/tmp' })
  const cwd = (await s.runCode('import os; os.getcwd()', { context: ctx })).text
  return { ctx, last: await last(), cwd }
})
await step('createJavascript', async () => {
  const ctx = await s.createCodeContext({ language: 'javascript' })
  const value = (await s.runCode('[1, 2].length', { context: ctx })).text
  return { ctx, last: await last(), value }
})
await step('createTwo', async () => {
  const a = await s.createCodeContext()
  const b = await s.createCodeContext()
  await s.runCode('mine = "a"', { context: a })
  const inB = await s.runCode('mine', { context: b })
  return { a: a.id, b: b.id, inB: inB.error?.name ?? null, ids: (await s.listCodeContexts()).map((c) => c.id) }
})
await throws('createInRoot', () => s.createCodeContext({ language: 'python', cwd: '/root' }))

// env vars: the sandbox's, a run's over them, and the sandbox's again
const text = (e) => e.results[0]?.text?.trim() ?? null
const line = (e) => e.logs.stdout[0] ?? null
const langs = {
  python: { code: 'import os; os.getenv("TEST_ENV_VAR")', out: text, per: 'import os; os.getenv("FOO", "default")' },
  javascript: { code: 'process.env.TEST_ENV_VAR', out: text, per: "process.env.FOO || 'default'" },
  bash: { code: 'echo $TEST_ENV_VAR', out: line, per: 'echo ${FOO:-default}' },
}
for (const [language, l] of Object.entries(langs)) {
  await step(`env_${language}`, async () => ({
    sandbox: l.out(await s.runCode(l.code, { language })),
    overwrite: l.out(await s.runCode(l.code, { language, envs: { TEST_ENV_VAR: 'overwrite' } })),
    after: l.out(await s.runCode(l.code, { language })),
    perRun: l.out(await s.runCode(l.per, { language, envs: { FOO: 'bar' } })),
    perRunAfter: l.out(await s.runCode(l.per, { language })),
  }))
}

// the sandbox stays for the test to look at; its teardown kills it
console.log(JSON.stringify(summary))
