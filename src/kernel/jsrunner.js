// jsrunner.js - a javascript context of the nanobox code bridge (bridge.py).
//
// Reads one JSON line per cell on stdin ({code, env}), runs the code in one
// persistent vm context (top-level declarations and globals survive between
// cells, as in a REPL), and answers on the pipe $NANOBOX_CTL_FD with one
// JSON line: {results: [mime bundle], error: {name, value, traceback}|null}.
// What the code prints goes to this process's own stdout and stderr, which
// the bridge reads as the cell's output. Pipes are synchronous on Linux, so
// everything printed is in the pipe before the done line is written.
'use strict';

const fs = require('fs');
const readline = require('readline');
const util = require('util');
const vm = require('vm');

const ctl = Number(process.env.NANOBOX_CTL_FD);
delete process.env.NANOBOX_CTL_FD;

// the bridge interrupts a cell with SIGINT; between cells it is harmless
process.on('SIGINT', () => {});

const sandbox = {
  console, process, require, module, Buffer, URL, URLSearchParams,
  TextEncoder, TextDecoder, setTimeout, clearTimeout, setInterval,
  clearInterval, setImmediate, clearImmediate, queueMicrotask,
  structuredClone, fetch: globalThis.fetch, __filename: '<cell>', __dirname: process.cwd(),
};
sandbox.global = sandbox;
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);

function bundle(value) {
  if (value === undefined) return null;
  const data = {'text/plain': util.inspect(value, {depth: 4, colors: false})};
  if (value !== null && typeof value === 'object' && !(value instanceof Error)) {
    try {
      const json = JSON.parse(JSON.stringify(value));
      if (json !== undefined) data['application/json'] = json;
    } catch (_) { /* not JSON-able: text only */ }
  }
  return data;
}

function failure(e) {
  if (e instanceof Error || (e && e.stack)) {
    return {name: e.name || 'Error', value: String(e.message), traceback: String(e.stack || e)};
  }
  return {name: 'Error', value: util.inspect(e), traceback: util.inspect(e)};
}

function done(msg) {
  fs.writeSync(ctl, JSON.stringify(msg) + '\n');
}

async function runCell(code) {
  let script;
  try {
    script = new vm.Script(code, {filename: '<cell>'});
  } catch (e) {
    if (!(e instanceof SyntaxError) || !/await/.test(String(e.message))) throw e;
    // top-level await: run as an async function (its declarations stay local)
    script = new vm.Script('(async () => {\n' + code + '\n})()', {filename: '<cell>', lineOffset: -1});
  }
  let value = script.runInContext(context, {breakOnSigint: true, displayErrors: false});
  if (value && typeof value.then === 'function') value = await value;
  return value;
}

const rl = readline.createInterface({input: process.stdin, terminal: false});
let queue = Promise.resolve();
rl.on('line', (line) => {
  queue = queue.then(async () => {
    let req;
    try {
      req = JSON.parse(line);
    } catch (_) {
      done({results: [], error: {name: 'Error', value: 'bad request', traceback: ''}});
      return;
    }
    const saved = {};
    for (const [k, v] of Object.entries(req.env || {})) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    try {
      const value = await runCell(req.code);
      const data = bundle(value);
      done({results: data ? [data] : [], error: null});
    } catch (e) {
      done({results: [], error: failure(e)});
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k]; else process.env[k] = v;
      }
    }
  });
});
rl.on('close', () => process.exit(0));
