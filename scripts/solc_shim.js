#!/usr/bin/env node
// A `solc` executable that py-solc-x can drive, built on the npm `solc` package.
//
// Why not the package's own `solcjs` CLI: it prints a line before the JSON,
// truncates piped output near 64 KiB and rejects `--allow-paths`, so
// solcx.compile_standard() cannot use it. This shim answers the only two
// calls py-solc-x makes:
//
//   solc_shim.js --version                 -> native `solc --version` format
//   solc_shim.js --standard-json [...]     -> standard JSON in on stdin, out on stdout
//
// Other flags py-solc-x may append (--allow-paths, --base-path) are accepted
// and ignored: every source is passed inline as `content`, and imports are
// refused (the callback below), so no file is ever read from disk.
'use strict';

const path = require('path');

// The package lives in the project's node_modules (scripts/test.sh installs it), next to scripts/.
const solc = require(path.join(__dirname, '..', 'node_modules', 'solc'));

const args = process.argv.slice(2);

if (args.includes('--version')) {
  // Native format, e.g. "Version: 0.8.28+commit.7893614a.Linux.g++".
  // solc.version() is "0.8.28+commit.7893614a.Emscripten.clang".
  process.stdout.write(
    'solc, the solidity compiler commandline interface\nVersion: ' + solc.version() + '\n'
  );
  process.exit(0);
}

if (!args.includes('--standard-json')) {
  process.stderr.write('solc_shim.js: only --version and --standard-json are supported\n');
  process.exit(2);
}

const chunks = [];
process.stdin.on('data', (chunk) => chunks.push(chunk));
process.stdin.on('end', () => {
  const input = Buffer.concat(chunks).toString('utf8');
  const findImports = (p) => ({ error: 'import not found (pass every source inline): ' + p });
  const output = solc.compile(input, { import: findImports });
  // One write of the whole string, then let node flush and exit naturally:
  // calling process.exit() here is what truncates large piped output.
  process.stdout.write(output);
});
