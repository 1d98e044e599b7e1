// Validates every object of the given multi-document YAML files against the
// Kubernetes OpenAPI schemas as compiled by kubernetes-models (core and apps
// APIs of Kubernetes 1.3x) and @kubernetes-models/prometheus-operator
// (PodMonitor, ServiceMonitor): types, required fields, enums, formats,
// quantities. An object of an unknown apiVersion/kind is an error.
// The schemas allow unknown fields (as the API server does, dropping them),
// so a misspelt field would pass; a strict pass walks each built-in object
// along the field lists of kubernetes-models' type declarations and reports
// every field that the API does not have (kubectl --validate=strict does the
// same against a live server).
// usage: NODE_PATH=DIR/node_modules node validate_k8s.mjs FILE...
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const require = createRequire(path.join(process.env.NODE_PATH || ".", "noop.js"));
const { parseAllDocuments } = require("yaml");

async function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "monitoring.coreos.com") {
    // The package exports ES modules only: import its file directly.
    const file = path.join(process.env.NODE_PATH, "@kubernetes-models/prometheus-operator",
                           "monitoring.coreos.com", version, kind + ".js");
    try {
      return (await import(pathToFileURL(file).href))[kind];
    } catch (e) {
      return undefined;
    }
  }
  const module = "kubernetes-models/" + (group ? group + "/" : "") + version + "/" + kind;
  try {
    return require(module)[kind];
  } catch (e) {
    return undefined;
  }
}

// --- strict field check over the .d.ts declarations --------------------------
const declarations = new Map();  // .d.ts path -> {fields: Map(name -> {file, map, array}) } or null

function resolveDeclaration(fromFile, spec) {
  if (spec.startsWith(".")) return path.resolve(path.dirname(fromFile), spec + ".d.ts");
  for (let dir = path.dirname(fromFile); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const candidate = path.join(dir, "node_modules", spec + ".d.ts");
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

// The fields of the first exported interface of a declaration file, each with
// the declaration file of its type when that type is another interface.
function fieldsOf(file) {
  if (declarations.has(file)) return declarations.get(file);
  let result = null;
  if (file && existsSync(file)) {
    const lines = readFileSync(file, "utf8").split("\n");
    const imports = new Map();
    for (const line of lines) {
      const m = line.match(/^import \{ (\w+) \} from "([^"]+)";/);
      if (m) imports.set(m[1], m[2]);
    }
    const start = lines.findIndex((l) => l.startsWith("export interface "));
    if (start >= 0) {
      result = new Map();
      if (/ extends TypeMeta/.test(lines[start])) { result.set("apiVersion", {}); result.set("kind", {}); }
      for (let i = start + 1; i < lines.length && !lines[i].startsWith("}"); i++) {
        const m = lines[i].match(/^    "([^"]+)"\??: (.*?);?$/);
        if (!m) continue;
        let type = m[2], map = false;
        if (type === "{") { map = true; type = (lines[i + 1].match(/\]: (.*?);?$/) || [])[1] || ""; }
        const array = type.match(/^Array<(\w+)>$/);
        const name = array ? array[1] : type;
        result.set(m[1], { file: imports.has(name) ? resolveDeclaration(file, imports.get(name)) : undefined,
                           map, array: !!array });
      }
    }
  }
  declarations.set(file, result);
  return result;
}

function strictCheck(value, file, where, problems) {
  const fields = fieldsOf(file);
  if (!fields || value === null || typeof value !== "object" || Array.isArray(value)) return;
  for (const [key, child] of Object.entries(value)) {
    const field = fields.get(key);
    if (!field) { problems.push(`${where}.${key}: unknown field`); continue; }
    if (!field.file) continue;
    const visit = (v, w) => strictCheck(v, field.file, w, problems);
    if (field.map && child) for (const [k, v] of Object.entries(child)) visit(v, `${where}.${key}[${k}]`);
    else if (field.array && Array.isArray(child)) child.forEach((v, i) => visit(v, `${where}.${key}[${i}]`));
    else visit(child, `${where}.${key}`);
  }
}

function declarationFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "monitoring.coreos.com") return undefined;  // CRD models: schema check only
  return path.join(process.env.NODE_PATH, "kubernetes-models", group, version, kind + ".d.ts");
}

let errors = 0, checked = 0;
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length) { console.error(`${file}: YAML: ${doc.errors[0].message}`); errors++; continue; }
    const object = doc.toJS();
    if (object === null) continue;
    const where = `${file}: ${object.kind}/${object.metadata?.name}`;
    const Model = object.apiVersion && object.kind ? await modelFor(object.apiVersion, object.kind) : undefined;
    if (!Model) { console.error(`${where}: no schema for ${object.apiVersion} ${object.kind}`); errors++; continue; }
    try {
      new Model(object).validate();
      const problems = [];
      strictCheck(object, declarationFor(object.apiVersion, object.kind), "", problems);
      for (const p of problems) console.error(`${where}: ${p}`);
      errors += problems.length;
      if (!problems.length) checked++;
    } catch (e) {
      console.error(`${where}: ${e.message}`);
      errors++;
    }
  }
}
console.log(`validate_k8s: ${checked} objects valid, ${errors} errors`);
process.exit(errors ? 1 : 0);
