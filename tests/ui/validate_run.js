// node validate_run.js VALIDATE.js SCHEMA.json CORPUS.json: prints, as JSON,
// the page's validator's errors for each document of the corpus (an array).
'use strict';
const fs = require('fs');
const path = require('path');
const [validatePath, schemaPath, corpusPath] = process.argv.slice(2);
const api = require(path.resolve(validatePath));
const validate = api.compile(JSON.parse(fs.readFileSync(schemaPath, 'utf8')));
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
process.stdout.write(JSON.stringify(corpus.map((doc) => validate(doc))));
