// templates.mjs - E2B's Template SDK against nanobox's template builder
// (docs/E2B.md, "Templates"), driven by the official E2B SDK (npm e2b) as a
// user's build script would: a template from the operator's image with
// runCmd, copy (a file and a directory, uploaded by content hash), setEnvs
// and setWorkdir, built under an alias with its logs; Template.exists;
// Sandbox.create(alias) and commands that see what the build made; a
// template from the first one (fromTemplate); a refused base image; delete.
// tests/integration/test_e2b.py runs it and asserts on the JSON summary it
// prints as its last line: one entry per step, {"thrown": ...} when the SDK
// threw.
//
//   node templates.mjs --tag <unique tag>
//
// Its sandboxes carry metadata {suite: tag}; it deletes its templates.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Sandbox, Template } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { created, summary, step, throws } = suite((e) => errInfo(e))

const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const alias = `tpl-${tag}`
const child = `tpl-${tag}-child`

// the build context: a file and a directory of two files
const ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'nb-e2b-tpl-'))
fs.writeFileSync(path.join(ctx, 'hello.txt'), `hello ${tag}\n`)
fs.mkdirSync(path.join(ctx, 'app'))
fs.writeFileSync(path.join(ctx, 'app', 'a.txt'), 'A\n')
fs.writeFileSync(path.join(ctx, 'app', 'b.txt'), 'B\n')

const logs = []
await step('existsBefore', async () => ({ exists: await Template.exists(alias) }))
await step('existsBase', async () => ({ exists: await Template.exists('base') }))
await step('build', async () => {
  const t = Template({ fileContextPath: ctx })
    .fromImage('nanobox:latest')
    .runCmd(`echo built-${tag} > /etc/nb-tpl-marker`)
    .copy('hello.txt', '/opt/hello.txt')
    .copy('app', '/opt/app')
    .setEnvs({ NB_TPL_VAR: `v-${tag}`, NB_TPL_Q: 'a "quoted" $value' })
    .setWorkdir('/opt')
    .runCmd('pwd > /etc/nb-tpl-pwd && printf "%s" "$NB_TPL_VAR" > /etc/nb-tpl-env')
  const info = await Template.build(t, alias, { onBuildLogs: (l) => logs.push(String(l.message ?? l)) })
  return { alias: info.alias ?? info.name, templateId: info.templateId, buildId: info.buildId,
    logLines: logs.length, sawStep: logs.some((l) => l.includes('nb-tpl-marker')) }
})
await step('existsAfter', async () => ({ exists: await Template.exists(alias) }))
await step('sandbox', async () => {
  const sbx = await Sandbox.create(alias, { metadata: { suite: tag }, timeoutMs: 120_000 })
  created.push(sbx.sandboxId)
  const run = async (c) => (await sbx.commands.run(c)).stdout
  const r = {
    templateId: (await sbx.getInfo()).templateId,
    marker: await run('cat /etc/nb-tpl-marker'),
    hello: await run('cat /opt/hello.txt'),
    app: await run('cat /opt/app/a.txt /opt/app/b.txt'),
    pwd: await run('cat /etc/nb-tpl-pwd'),
    env: await run('cat /etc/nb-tpl-env'),
    envQ: await run('printf "%s" "$NB_TPL_Q"'),
  }
  await sbx.kill()
  return r
})
await step('fromTemplate', async () => {
  const t = Template().fromTemplate(alias).runCmd('cat /etc/nb-tpl-marker > /etc/nb-tpl-child')
  await Template.build(t, child)
  const sbx = await Sandbox.create(child, { metadata: { suite: tag }, timeoutMs: 120_000 })
  created.push(sbx.sandboxId)
  const out = (await sbx.commands.run('cat /etc/nb-tpl-child')).stdout
  await sbx.kill()
  return { out }
})
await throws('forbiddenImage', () => Template.build(Template().fromImage('ubuntu:22.04').runCmd('true'), `${alias}-bad`))
await throws('failingStep', () => Template.build(Template().fromTemplate('base').runCmd('echo failing-step; exit 3'), `${alias}-fail`))
await step('deleteFail', async () => ({ deleted: await fetchDelete(`${alias}-fail`) }))
await step('delete', async () => ({ child: await fetchDelete(child), parent: await fetchDelete(alias) }))
await step('existsDeleted', async () => ({ exists: await Template.exists(alias) }))

// E2B's SDK has no template delete of its own (the CLI does): DELETE /templates/{id}
async function fetchDelete (id) {
  const r = await fetch(`${process.env.E2B_API_URL}/templates/${id}`, {
    method: 'DELETE', headers: { 'X-API-KEY': process.env.E2B_API_KEY },
  })
  return r.status
}

fs.rmSync(ctx, { recursive: true, force: true })
console.log(JSON.stringify(summary))
