// modern.mjs - the code interpreter's TypeScript and modern JavaScript,
// driven by the official SDK (npm @e2b/code-interpreter, pinned in
// package.json) as E2B's own tests do (js/tests/defaultKernels.test.ts):
// `language: 'ts'` / 'typescript' contexts, `import` of ES modules (a
// builtin and a file of the working directory), dynamic import(), top-level
// `await` whose value is the result, and what an async cell declares
// (const, let, function, class) kept for the next cell, in javascript and
// typescript contexts. tests/integration/test_e2b.py runs it and asserts on
// the JSON summary it prints as its last line: one entry per step,
// {"thrown": ...} when the SDK threw.
//
//   node modern.mjs --tag <unique tag> --code
//
// Its sandbox carries metadata {suite: tag}; the test deletes it.
import { Sandbox } from '@e2b/code-interpreter'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { created, summary, step } = suite((e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) }))
const ex = (e) => ({
  text: e.text,
  stdout: e.logs.stdout,
  error: e.error ? { name: e.error.name, value: e.error.value } : null,
})

if (args.includes('--code')) {
  const c = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000 })
  created.push(c.sandboxId)
  summary.codeSandbox = c.sandboxId

  // E2B's own three: ESM import, top-level await, a ts cell
  await step('esmImport', async () =>
    ex(await c.runCode("\n    import { readFileSync } from 'fs'\n    console.log(typeof readFileSync)\n    ", { language: 'js' })))
  await step('topLevelAwait', async () =>
    ex(await c.runCode("\n    await Promise.resolve('Hello World!')\n    ", { language: 'js' })))
  await step('tsKernel', async () =>
    ex(await c.runCode('const message: string = "Hello World!"; console.log(message)', { language: 'ts' })))

  // declarations of async cells persist; a module of the working directory
  await step('jsDeclarations', async () => {
    await c.files.write('lib.mjs', 'export const base = 40\nexport default function inc (n) { return n + 1 }\n')
    const first = ex(await c.runCode(
      "import inc, { base } from './lib.mjs'\nconst got = await Promise.resolve(base)\nlet more = 1\n" +
      'function total () { return inc(got) + more }\nclass Box { get v () { return total() } }', { language: 'javascript' }))
    const next = ex(await c.runCode('new Box().v', { language: 'javascript' }))
    const dyn = ex(await c.runCode("(await import('./lib.mjs')).base + more", { language: 'javascript' }))
    return { first, next, dyn }
  })
  await step('tsContext', async () => {
    const ctx = await c.createCodeContext({ language: 'typescript' })
    const first = ex(await c.runCode(
      'interface P { x: number }\nconst norm = (p: P): number => Math.abs(p.x)\n' +
      "import { join } from 'path'\nlet n: number = await Promise.resolve(-41)", { context: ctx }))
    const next = ex(await c.runCode('norm({ x: n } as P) + 1', { context: ctx }))
    const mod = ex(await c.runCode("join('a', 'b')", { context: ctx }))
    const bad = ex(await c.runCode('let broken: = 1', { context: ctx }))
    return { language: ctx.language, first, next, mod, bad }
  })
  await step('tsDefault', async () => {
    await c.runCode('const k: number = 21', { language: 'typescript' })
    return ex(await c.runCode('k * 2', { language: 'ts' }))
  })
}

console.log(JSON.stringify(summary))
