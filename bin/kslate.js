#!/usr/bin/env node
// The compiled CLI (npm install / npm ci build it via the `prepare` script).
import '../dist/runtime/main.js';
