// Runs inside a script tool's sandbox (node): loads the tool's source as a CommonJS
// module. If it exports a function (module.exports = fn, or exports.main = fn), that
// function is called with the arguments read as JSON from stdin and its (awaited) result
// is written to stdout as one JSON line. Otherwise the source is a plain script that
// reads stdin and writes stdout itself (a top-level `main` is not enough: scripts often
// call their own main, which would then run twice).
"use strict";
const fs = require("fs");
const path = require("path");

const file = path.resolve(process.argv[1]);
const exported = require(file);
let main = null;
if (typeof exported === "function") {
  main = exported;
} else if (exported && typeof exported.main === "function") {
  main = exported.main;
}
if (main !== null) {
  const args = JSON.parse(fs.readFileSync(0, "utf8"));
  Promise.resolve()
    .then(() => main(args))
    .then((value) => {
      const text = JSON.stringify(value === undefined ? null : value);
      process.stdout.write("\n" + text + "\n");
    })
    .catch((error) => {
      process.stderr.write(String((error && error.stack) || error) + "\n");
      process.exitCode = 1;
    });
}
