// domain.mjs - the E2B SDK's other mode, E2B_DOMAIN, against nanobox: no
// E2B_SANDBOX_URL (and, when E2B_API_URL is unset too, the API at
// https://api.<E2B_DOMAIN>), so the SDK sends its data plane to
// https://<port>-<sandboxId>.<E2B_DOMAIN> (envd on 49983, the code
// interpreter on 49999), which nginx routes by host name as it does the
// sandboxes' exposed ports. tests/integration/test_e2b.py runs it against
// a TLS stack, test_e2b_tls.py against one that serves http and https at
// once; both assert on the JSON summary it prints as its last line.
//
//   node domain.mjs --tag <tag> --port <nginx port> [--code]
//
// Test-only: the SDK names no port (https is 443), and *.<domain> has no
// DNS here: hostroute.mjs sends those connections to nginx's loopback port.
import { routeDomainTo } from './hostroute.mjs'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const port = Number(args[args.indexOf('--port') + 1])
const code = args.includes('--code')
routeDomainTo(process.env.E2B_DOMAIN, port)

const { Sandbox } = await import(code ? '@e2b/code-interpreter' : 'e2b')
const { steps, created, summary, step } = suite((e) => errInfo(e))
const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })

const sbx = await Sandbox.create(code ? undefined : 'base', { metadata: { suite: tag }, timeoutMs: 120_000 })
created.push(sbx.sandboxId)
await step('urls', async () => ({ envd: sbx.envdApiUrl, host: sbx.getHost(8000), id: sbx.sandboxId }))
await step('isRunning', async () => ({ running: await sbx.isRunning() }))
await step('run', async () => {
  const r = await sbx.commands.run('echo "hi from $(pwd)"')
  return { stdout: r.stdout, exitCode: r.exitCode }
})
await step('files', async () => {
  await sbx.files.write('d/x.txt', 'over the domain')
  return { text: await sbx.files.read('d/x.txt'), list: (await sbx.files.list('d')).map((e) => e.path) }
})
// streaming through TLS: commands.run streams over Connect, each line as
// the command prints it, long before it ends
await step('stream', async () => {
  const t0 = Date.now()
  const at = []
  const r = await sbx.commands.run('for i in 1 2 3 4; do echo line$i; sleep 0.5; done', {
    onStdout: (d) => at.push(Date.now() - t0)
  })
  const total = Date.now() - t0
  return { stdout: r.stdout, chunks: at.length, early: at.length > 0 && at[0] < total - 1000 }
})
if (code) {
  await step('runCodeStream', async () => {
    const t0 = Date.now()
    const at = []
    await sbx.runCode('import time\nfor i in range(4):\n    print(i, flush=True)\n    time.sleep(0.5)', {
      onStdout: () => at.push(Date.now() - t0)
    })
    const total = Date.now() - t0
    return { chunks: at.length, early: at.length > 0 && at[0] < total - 1000 }
  })
  await step('runCode', async () => {
    const ex = await sbx.runCode('import os\nprint(open("d/x.txt").read())\n6 * 7')
    return { stdout: ex.logs.stdout, text: ex.text, error: ex.error ?? null }
  })
}
// any port an app listens on, as in E2B's cloud: nanobox opens it on the
// first request (ports_on_demand = yes), through the same host routing
await step('getHostFetch', async () => {
  await sbx.commands.run('mkdir -p /tmp/www && printf "on demand" > /tmp/www/index.txt')
  await sbx.commands.run('python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/www', { background: true })
  await sbx.commands.run(`python3 -c 'import socket, time
for i in range(200):
    try:
        socket.create_connection(("127.0.0.1", 8000), 0.5).close()
        break
    except OSError:
        time.sleep(0.05)'`)
  const r = await fetch(`https://${sbx.getHost(8000)}/index.txt`)
  const again = await fetch(`https://${sbx.getHost(8000)}/index.txt`)
  return { status: r.status, text: await r.text(), again: again.status }
})
await step('kill', async () => ({ killed: await sbx.kill() }))
await step('isRunningAfterKill', async () => ({ running: await sbx.isRunning() }))

console.log(JSON.stringify(summary))
