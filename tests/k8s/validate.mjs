// Validates Kubernetes objects (a JSON array, from render.py) against the
// Kubernetes API schemas that the npm package kubernetes-models compiles
// (types, required fields, enums, formats), and strictly, as
// `kubectl apply --validate=strict` would: a field the API does not have (a
// typo such as backoffLimitPerIdx) is an error. kubernetes-models' compiled
// validators let unknown fields through, so the field names are read from its
// TypeScript declarations, which are generated from the same OpenAPI document
// and list every field of every type.
//   BF_K8S_MODULES=node_modules node validate.mjs OBJECTS.json
// Prints one line per object; exit 0 if all are valid, 1 otherwise.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.env.BF_K8S_MODULES;
if (!modules) throw new Error("set BF_K8S_MODULES to the node_modules holding kubernetes-models");
const pkgRoot = path.join(modules, "kubernetes-models");

// "apps/v1" + "Deployment" -> kubernetes-models/apps/v1/Deployment
function modelFile(apiVersion, kind, ext) {
  return path.join(pkgRoot, apiVersion, kind + ext);
}

// --- field names from the .d.ts files ---------------------------------------
const cache = new Map();

function resolveImport(fromFile, spec) {
  if (spec.startsWith(".")) return path.resolve(path.dirname(fromFile), spec.replace(/\.js$/, ".d.ts"));
  return path.join(modules, spec.replace(/\.js$/, "") + ".d.ts");
}

// The first interface in a .d.ts: { fields: Map(name -> type text), imports: Map(ident -> file) },
// or null for a type alias (a leaf such as Quantity or IntOrString).
function declaration(file) {
  if (cache.has(file)) return cache.get(file);
  const text = fs.readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  const imports = new Map();
  for (const m of text.matchAll(/^import \{ ([^}]+) \} from "([^"]+)";$/gm))
    for (const id of m[1].split(",").map((s) => s.trim())) imports.set(id, resolveImport(file, m[2]));
  const start = text.search(/^export interface I\w+( extends [\w, ]+)? \{$/m);
  let result = null;
  if (start >= 0) {
    const body = text.slice(text.indexOf("{", start) + 1, text.indexOf("\n}", start));
    const fields = new Map();
    // "name"?: TYPE;  where TYPE may span lines and hold { ... ; }
    let i = 0;
    while ((i = body.indexOf('"', i)) >= 0) {
      const end = body.indexOf('"', i + 1);
      const name = body.slice(i + 1, end);
      let j = body.indexOf(":", end) + 1, depth = 0, k = j;
      for (; k < body.length; k++) {
        const ch = body[k];
        if (ch === "{" || ch === "<" || ch === "(") depth++;
        else if (ch === "}" || ch === ">" || ch === ")") depth--;
        else if (ch === ";" && depth === 0) break;
        else if (ch === '"' && depth === 0) k = body.indexOf('"', k + 1);   // a string literal type
      }
      fields.set(name, body.slice(j, k).trim());
      i = k + 1;
    }
    result = { fields, imports, file };
  }
  cache.set(file, result);
  return result;
}

// Checks obj against the declaration, collecting "path: unknown field" messages.
function strict(decl, obj, where, errors) {
  if (!decl || obj === null || typeof obj !== "object" || Array.isArray(obj)) return;
  for (const [key, value] of Object.entries(obj)) {
    const type = decl.fields.get(key);
    if (type === undefined) {
      errors.push(`${where}.${key}: no such field (the API's fields here: ${[...decl.fields.keys()].join(", ")})`);
      continue;
    }
    const id = (type.match(/\bI[A-Z]\w+/) || [])[0];
    if (!id || !decl.imports.has(id)) continue;   // a primitive, an enum of strings
    const sub = declaration(decl.imports.get(id));
    if (/^Array</.test(type)) {
      if (Array.isArray(value)) value.forEach((v, n) => strict(sub, v, `${where}.${key}[${n}]`, errors));
    } else if (/^\{\s*\[key: string\]/.test(type)) {
      if (value && typeof value === "object") for (const [mk, mv] of Object.entries(value)) strict(sub, mv, `${where}.${key}.${mk}`, errors);
    } else {
      strict(sub, value, `${where}.${key}`, errors);
    }
  }
}

// --- each object ----------------------------------------------------------------
export async function validateObject(obj) {
  const errors = [];
  const js = modelFile(obj.apiVersion, obj.kind, ".js");
  if (!fs.existsSync(js)) return [`no schema for apiVersion ${obj.apiVersion}, kind ${obj.kind}`];
  const mod = await import(pathToFileURL(js).href);
  try {
    new mod[obj.kind](obj).validate();
  } catch (e) {
    errors.push(String(e.message || e));
  }
  strict(declaration(modelFile(obj.apiVersion, obj.kind, ".d.ts")), obj, obj.kind, errors);
  return errors;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const objs = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  let bad = 0;
  for (const obj of objs) {
    const errors = await validateObject(obj);
    const name = `${obj.kind}/${obj.metadata && obj.metadata.name}`;
    if (errors.length) {
      bad++;
      console.log(`INVALID ${name}:`);
      for (const e of errors) console.log(`  ${e}`);
    } else {
      console.log(`valid ${obj.apiVersion} ${name}`);
    }
  }
  process.exit(bad ? 1 : 0);
}
