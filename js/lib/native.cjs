// The engine, compiled from ../src by `napi build` when the package is installed.
"use strict";
module.exports = require("../attest.node");
