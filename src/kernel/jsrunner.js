// jsrunner.js - a javascript or typescript context of the nanobox code
// bridge (bridge.py).
//
// Reads one JSON line per cell on stdin ({code, env}), runs the code in one
// persistent vm context (top-level declarations and globals survive between
// cells, as in a REPL), and answers on the pipe $NANOBOX_CTL_FD with one
// JSON line: {results: [mime bundle], error: {name, value, traceback}|null}.
// What the code prints goes to this process's own stdout and stderr, which
// the bridge reads as the cell's output. Pipes are synchronous on Linux, so
// everything printed is in the pipe before the done line is written.
//
// A cell is JavaScript as a module would have it: `import` declarations,
// `import()`, `import.meta` and top-level `await` work, and the last
// expression's value (awaited) is the result. A cell that needs it is
// rewritten (see rewrite()) into a script whose new top-level names are
// declared on its first line and an async function that assigns them, so
// `const`, `let`, `function`, `class` and imports persist like a plain
// script's. A typescript context (NANOBOX_JS_LANG=typescript) first
// transpiles the cell with the image's typescript compiler (Debian's
// node-typescript): types erased, nothing type-checked.
'use strict';

const fs = require('fs');
const path = require('path');
const readline = require('readline');
const util = require('util');
const vm = require('vm');
const {createRequire, builtinModules} = require('module');
const {pathToFileURL} = require('url');

const ctl = Number(process.env.NANOBOX_CTL_FD);
delete process.env.NANOBOX_CTL_FD;
const typescript = process.env.NANOBOX_JS_LANG === 'typescript';
delete process.env.NANOBOX_JS_LANG;

// The bridge interrupts a cell with SIGINT: a running script stops
// (breakOnSigint), a cell waiting on a promise stops waiting (what it
// started goes on). Between cells it is harmless.
let stopWaiting = null;
// What a cell left running may throw later is told on stderr, as node's
// REPL does; the context stays.
process.on('unhandledRejection', (e) => console.error('Uncaught (in promise)', e));
process.on('uncaughtException', (e) => console.error('Uncaught', e));
process.on('SIGINT', () => {
  if (stopWaiting) stopWaiting();
});

// Debian's node finds these in /usr/share/nodejs (acorn comes with nodejs,
// typescript with node-typescript). Without acorn a cell runs as a plain
// script, as before; without typescript a typescript cell fails, saying so.
function optional(name) {
  try {
    return require(name);
  } catch (_) {
    return null;
  }
}
const acorn = optional('acorn');
let ts;

// `require` and `import` of a cell resolve from the working directory, as
// a file there would (the runner's own directory means nothing to a user).
const here = () => path.join(process.cwd(), '<cell>');
function cellRequire(id) {
  return createRequire(here())(id);
}
cellRequire.resolve = (id, opts) => createRequire(here()).resolve(id, opts);
cellRequire.cache = require.cache;
function moduleUrl(spec) {
  spec = String(spec);
  if (spec.startsWith('node:') || builtinModules.includes(spec) || /^[a-z][a-z0-9+.-]*:/i.test(spec)) {
    return spec;
  }
  if (spec.startsWith('/') || spec.startsWith('./') || spec.startsWith('../') || spec === '.' || spec === '..') {
    return pathToFileURL(path.resolve(process.cwd(), spec)).href;
  }
  try {
    return pathToFileURL(cellRequire.resolve(spec)).href;
  } catch (_) {
    return spec; // import() says what is missing
  }
}
const cellImport = (spec, opts) => import(moduleUrl(spec), opts);
const cellMeta = () => ({url: pathToFileURL(here()).href, resolve: moduleUrl});

const sandbox = {
  console, process, require: cellRequire, module, Buffer, URL, URLSearchParams,
  TextEncoder, TextDecoder, setTimeout, clearTimeout, setInterval,
  clearInterval, setImmediate, clearImmediate, queueMicrotask,
  structuredClone, fetch: globalThis.fetch, __filename: '<cell>', __dirname: process.cwd(),
};
sandbox.__nanobox_import = cellImport;
sandbox.__nanobox_meta = cellMeta;
sandbox.global = sandbox;
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);

function bundle(value) {
  if (value === undefined) return null;
  // a string as itself, as E2B's javascript kernel shows it (process.cwd())
  const text = typeof value === 'string' ? value : util.inspect(value, {depth: 4, colors: false});
  const data = {'text/plain': text};
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

// ---------------------------------------------------------------- rewriting

// The top-level names made by earlier cells: 'lexical' (let, const, class)
// or 'var' (var, function). A name made again is assigned, not declared.
const declared = new Map();

function patternNames(p, out) {
  if (!p) return out;
  switch (p.type) {
    case 'Identifier': out.push(p.name); break;
    case 'ObjectPattern': for (const q of p.properties) patternNames(q.type === 'RestElement' ? q.argument : q.value, out); break;
    case 'ArrayPattern': for (const q of p.elements) patternNames(q, out); break;
    case 'AssignmentPattern': patternNames(p.left, out); break;
    case 'RestElement': patternNames(p.argument, out); break;
  }
  return out;
}

// The declaration a top-level statement holds (export stripped), or null.
function declarationOf(stmt) {
  if (stmt.type === 'ExportNamedDeclaration' || stmt.type === 'ExportDefaultDeclaration') {
    const d = stmt.declaration;
    return d && (d.type === 'VariableDeclaration' || (/Declaration$/.test(d.type) && d.id)) ? d : null;
  }
  return /^(Variable|Function|Class)Declaration$/.test(stmt.type) ? stmt : null;
}

// [name, kind] of what a declaration makes at the top level.
function declaredNames(d) {
  if (d.type === 'VariableDeclaration') {
    const kind = d.kind === 'var' ? 'var' : 'lexical';
    return d.declarations.flatMap((x) => patternNames(x.id, []).map((n) => [n, kind]));
  }
  return [[d.id.name, d.type === 'FunctionDeclaration' ? 'var' : 'lexical']];
}

// What the cell uses of modules: top-level await, import/export
// declarations, and the import() and import.meta anywhere (rewritten to the
// context's own: a vm script has no module loader of its own).
function scan(ast) {
  const found = {topAwait: false, edits: []};
  const visit = (node, inFn) => {
    switch (node.type) {
      case 'FunctionDeclaration': case 'FunctionExpression': case 'ArrowFunctionExpression':
        inFn = true; break;
      case 'AwaitExpression': if (!inFn) found.topAwait = true; break;
      case 'ForOfStatement': if (node.await && !inFn) found.topAwait = true; break;
      case 'ImportExpression':
        found.edits.push([node.start, node.start + 6, '__nanobox_import']); break;
      case 'MetaProperty':
        if (node.meta.name === 'import') found.edits.push([node.start, node.end, '__nanobox_meta()']);
        break;
    }
    for (const key of Object.keys(node)) {
      const v = node[key];
      if (Array.isArray(v)) {
        for (const c of v) if (c && typeof c.type === 'string') visit(c, inFn);
      } else if (v && typeof v.type === 'string' && key !== 'loc') {
        visit(v, inFn);
      }
    }
  };
  visit(ast, false);
  return found;
}

// The cell as the script to run: {source, names} (names: what it declares
// at the top, added to `declared` once it compiles).
function rewrite(code) {
  let ast;
  try {
    ast = acorn.parse(code, {ecmaVersion: 'latest', sourceType: 'script', allowAwaitOutsideFunction: true,
      allowImportExportEverywhere: true, allowHashBang: true});
  } catch (_) {
    return {source: code, names: []}; // node's own SyntaxError says it best
  }
  const {topAwait, edits} = scan(ast);
  const names = [];
  let modular = false;
  for (const stmt of ast.body) {
    if (/^(Import|Export)/.test(stmt.type)) modular = true;
    const d = declarationOf(stmt);
    if (d) names.push(...declaredNames(d));
    if (stmt.type === 'ImportDeclaration') {
      for (const sp of stmt.specifiers) names.push([sp.local.name, 'lexical']);
    }
  }
  const again = names.some(([n, k]) => declared.has(n) && (k === 'lexical' || declared.get(n) === 'lexical'));
  // Text of code[from, to) with the edits inside it applied.
  const text = (from, to) => {
    let out = '';
    let at = from;
    for (const [a, b, t] of edits) {
      if (a >= from && b <= to) {
        out += code.slice(at, a) + t;
        at = b;
      }
    }
    return out + code.slice(at, to);
  };
  edits.sort((x, y) => x[0] - y[0]);
  if (!topAwait && !modular && !again) {
    // a plain script; its top-level `const`s made `let`s, so that a later
    // cell may make the name again
    for (const stmt of ast.body) {
      if (stmt.type === 'VariableDeclaration' && stmt.kind === 'const') edits.push([stmt.start, stmt.start + 5, 'let  ']);
    }
    edits.sort((x, y) => x[0] - y[0]);
    return {source: text(0, code.length), names};
  }

  // An async function's body: declarations become assignments to names
  // declared before it (on the first line: line numbers stay), the last
  // expression statement its return value.
  const hoistLet = [];
  const hoistVar = [];
  const fnFirst = [];
  const newline = (s, from, to) => s + '\n'.repeat(Math.max(0, (code.slice(from, to).match(/\n/g) || []).length - (s.match(/\n/g) || []).length));
  const hoist = (n, kind) => {
    if (declared.has(n) || hoistLet.includes(n) || hoistVar.includes(n)) return;
    (kind === 'var' ? hoistVar : hoistLet).push(n);
  };
  let body = '';
  let at = 0;
  let imports = 0;
  ast.body.forEach((stmt, i) => {
    body += text(at, stmt.start);
    at = stmt.end;
    const d = declarationOf(stmt);
    let s;
    if (stmt.type === 'ImportDeclaration') {
      const m = '__nanobox_m' + imports++;
      const src = JSON.stringify(stmt.source.value);
      const sets = stmt.specifiers.map((sp) => {
        hoist(sp.local.name, 'lexical');
        if (sp.type === 'ImportNamespaceSpecifier') return `${sp.local.name} = ${m}`;
        const key = sp.type === 'ImportDefaultSpecifier' ? 'default' : (sp.imported.name ?? sp.imported.value);
        return `${sp.local.name} = ${m}[${JSON.stringify(key)}]`;
      });
      s = `const ${m} = await __nanobox_import(${src});` + (sets.length ? ` void (${sets.join(', ')});` : '');
    } else if (d && d.type === 'VariableDeclaration') {
      const parts = [];
      for (const x of d.declarations) {
        const ns = patternNames(x.id, []);
        ns.forEach((n) => hoist(n, d.kind === 'var' ? 'var' : 'lexical'));
        if (x.init) parts.push(`void (${text(x.id.start, x.id.end)} = ${text(x.init.start, x.init.end)})`);
        else if (d.kind !== 'var') parts.push(`void (${ns.map((n) => n + ' = undefined').join(', ')})`);
      }
      s = parts.join(', ') + ';';
    } else if (d && d.type === 'FunctionDeclaration' && declared.get(d.id.name) === 'lexical') {
      s = `void (${d.id.name} = ${text(d.start, d.end)});`; // a let's name: not hoisted in the cell
    } else if (d && d.type === 'FunctionDeclaration') {
      hoist(d.id.name, 'var');
      fnFirst.push(`this.${d.id.name} = ${d.id.name};`);
      s = text(d.start, d.end);
    } else if (d && d.type === 'ClassDeclaration') {
      hoist(d.id.name, 'lexical');
      s = `void (${d.id.name} = ${text(d.start, d.end)});`;
    } else if (stmt.type === 'ExportDefaultDeclaration') {
      s = text(stmt.declaration.start, stmt.declaration.end) + ';';
    } else if (/^Export/.test(stmt.type)) {
      s = ''; // export {a, b}, export * from: nothing to run in a cell
    } else if (stmt.type === 'ExpressionStatement' && i === ast.body.length - 1) {
      s = `return (${text(stmt.expression.start, stmt.expression.end)});` + text(stmt.expression.end, stmt.end).replace(/^\s*;/, '');
    } else {
      s = text(stmt.start, stmt.end);
    }
    body += newline(s, stmt.start, stmt.end);
  });
  body += text(at, code.length);
  const decl = (hoistLet.length ? `let ${hoistLet.join(', ')}; ` : '') + (hoistVar.length ? `var ${hoistVar.join(', ')}; ` : '');
  return {source: `${decl}(async () => { ${fnFirst.join(' ')}${body}\n})()`, names};
}

function transpile(code) {
  if (ts === undefined) ts = optional('typescript');
  if (!ts) {
    const e = new Error("this sandbox's image has no typescript compiler (Debian's node-typescript): " +
      'create the sandbox from the nanobox-python template');
    e.name = 'TypeScriptMissing';
    throw e;
  }
  const out = ts.transpileModule(code, {
    reportDiagnostics: true,
    compilerOptions: {
      target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, isolatedModules: true,
      preserveValueImports: true, esModuleInterop: true, jsx: ts.JsxEmit.React, sourceMap: false,
    },
  });
  const errs = (out.diagnostics || []).filter((x) => x.category === ts.DiagnosticCategory.Error);
  if (errs.length) {
    const lines = errs.map((x) => {
      const msg = ts.flattenDiagnosticMessageText(x.messageText, '\n');
      if (!x.file || x.start === undefined) return msg;
      const {line, character} = x.file.getLineAndCharacterOfPosition(x.start);
      return `<cell>:${line + 1}:${character + 1}: ${msg} (TS${x.code})`;
    });
    const e = new SyntaxError(lines[0]);
    e.stack = 'SyntaxError: ' + lines.join('\n');
    throw e;
  }
  // the module marker a transpiled module may end with
  return out.outputText.replace(/\nexport \{\};\s*$/, '\n');
}

async function runCell(code) {
  if (typescript) code = transpile(code);
  const {source, names} = acorn ? rewrite(code) : {source: code, names: []};
  const script = new vm.Script(source, {filename: '<cell>', importModuleDynamically: cellImport});
  for (const [n, k] of names) if (!declared.has(n)) declared.set(n, k);
  let value = script.runInContext(context, {breakOnSigint: true, displayErrors: false});
  if (value && typeof value.then === 'function') {
    const interrupted = new Promise((_, reject) => {
      stopWaiting = () => {
        const e = new Error('Script execution was interrupted by `SIGINT`');
        e.name = 'Interrupted';
        reject(e);
      };
    });
    try {
      value = await Promise.race([value, interrupted]);
    } finally {
      stopWaiting = null;
    }
  }
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
