// hostroute.mjs - test-only: sends the E2B SDK's E2B_DOMAIN connections to
// nginx's loopback port. In that mode the SDK reaches a sandbox at
// https://<port>-<sandboxId>.<E2B_DOMAIN> on 443, and *.<domain> has no DNS
// here, so tls.connect is wrapped: a connection to a host under E2B_DOMAIN
// goes to 127.0.0.1:<port>, keeping the host name for SNI and Host (what a
// wildcard DNS record and port 443 give a real setup). The certificate is
// still verified (NODE_EXTRA_CA_CERTS names the test CA). node's fetch
// goes through it too.
//
//   import { routeDomainTo } from './hostroute.mjs'
//   routeDomainTo(process.env.E2B_DOMAIN, port)
import tls from 'node:tls'

export function routeDomainTo (domain, port) {
  const connect = tls.connect
  tls.connect = function (...a) {
    const o = a.find((x) => x !== null && typeof x === 'object')
    if (o && typeof o.host === 'string' && o.host.endsWith('.' + domain)) {
      o.servername = o.servername || o.host
      o.host = '127.0.0.1'
      o.port = port
    }
    return connect.apply(this, a)
  }
}
