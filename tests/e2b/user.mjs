// user.mjs - E2B's user layout on nanobox, driven by the official E2B SDK
// (npm e2b, pinned in package.json) as a user's code would: the home and
// cwd /home/user for commands, files and the code interpreter's python,
// javascript, typescript and bash contexts, the user's name and the owner
// of the files it writes, `user: 'root'` and `sudo` refused with a clear
// error, no-new-privileges still on. tests/integration/test_e2b.py runs it
// against stacks of the default config (E2B's layout: e2b_user_home) and
// of others, and asserts on the JSON summary it prints as its last line:
// one entry per step, {"thrown": ...} when the SDK threw.
//
//   node user.mjs --tag <unique tag> [--code] [--keep]
//
// Its sandboxes carry metadata {suite: tag}; it kills them before it exits
// (unless --keep: the summary's "created").
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { steps, created, summary, step, throws } = suite((e) => errInfo(e))

const errInfo = (e) => ({
  name: e?.constructor?.name, message: String(e?.message ?? e),
  ...(e?.exitCode !== undefined && { exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr }),
})
const out = async (p) => (await p).stdout

const sbx = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 120_000 })
created.push(sbx.sandboxId)
const cmds = sbx.commands

await step('whoami', async () => ({ stdout: await out(cmds.run('whoami; id -un')) }))
await step('home', async () => ({
  stdout: await out(cmds.run('pwd; echo "$HOME"; cd ~ && pwd; python3 -c "import os; print(os.path.expanduser(\'~\'))"')),
}))
await step('physicalCwd', async () => ({ stdout: await out(cmds.run('pwd -P; python3 -c "import os; print(os.getcwd())"')) }))
await step('asUser', async () => ({ stdout: await out(cmds.run('whoami', { user: 'user' })) }))
await throws('asRoot', () => cmds.run('id -u', { user: 'root' }))
await throws('sudo', () => cmds.run('sudo id -u'))
await step('noNewPrivs', async () => ({ stdout: await out(cmds.run('grep -E "^(NoNewPrivs|CapEff)" /proc/self/status')) }))
// a relative path is in /home/user, for files and for commands alike
await step('writeRelative', async () => {
  const w = await sbx.files.write('notes/a.txt', 'from files.write\n')
  const cat = await out(cmds.run('cat notes/a.txt; stat -c "%U %G %a" notes/a.txt'))
  return { path: w.path, cat }
})
await step('commandFileOwner', async () => {
  await cmds.run('mkdir -p made && echo by-command > made/b.txt')
  const i = await sbx.files.getInfo('made/b.txt')
  return { path: i.path, owner: i.owner, group: i.group, text: await sbx.files.read('/home/user/made/b.txt') }
})
await step('relativeCwd', async () => ({ stdout: await out(cmds.run('pwd; ls', { cwd: 'made' })) }))
await step('listHome', async () => (await sbx.files.list('/home/user')).map((e) => `${e.name}:${e.path}`).sort())
await step('sameFilesOnTheNativePath', async () => ({ stdout: await out(cmds.run('cat /workspace/made/b.txt')) }))
await step('writeInfo', async () => {
  const w = await sbx.files.write('owned.txt', 'mine')
  const i = await sbx.files.getInfo(w.path)
  return { path: i.path, owner: i.owner, group: i.group }
})
summary.userSandbox = sbx.sandboxId

// the code interpreter (--code: nanobox-python is built): its kernels see the home's files
if (args.includes('--code')) {
  const { Sandbox: CodeSandbox } = await import('@e2b/code-interpreter')
  const c = await CodeSandbox.create({ metadata: { suite: tag }, timeoutMs: 120_000 })
  created.push(c.sandboxId)
  await step('codeHome', async () => {
    await c.files.write('in-home.txt', 'seen by the kernel')
    const read = (await c.runCode('open("in-home.txt").read()')).text
    const ctx = await c.createCodeContext()
    const inCtx = (await c.runCode('open("in-home.txt").read()', { context: ctx })).text
    const listed = (await c.listCodeContexts()).map((x) => (x.id === ctx.id ? 'new' : x.id) + ':' + x.cwd).sort()
    return { read, ctxCwd: ctx.cwd, inCtx, listed }
  })
  // what each language's own call says (E2B's cwd.test.ts)
  await step('codeCwd', async () => ({
    python: (await c.runCode('from pathlib import Path; print(Path.cwd())', { language: 'python' })).logs.stdout.join().trim(),
    javascript: (await c.runCode('process.cwd()', { language: 'js' })).text,
    typescript: (await c.runCode('process.cwd()', { language: 'ts' })).text,
    bash: (await c.runCode('pwd', { language: 'bash' })).logs.stdout.join().trim(),
  }))
}

// --keep: the caller looks at them through nanobox's own API, then deletes them
if (!args.includes('--keep')) for (const id of created) await Sandbox.kill(id).catch(() => {})
console.log(JSON.stringify(summary))
