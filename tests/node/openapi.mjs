// Validates the daemon's answers against OpenAI's published OpenAPI description
// (../shared/data/openai-openapi.json beside the repository, OpenAPI 3.1 = JSON Schema 2020-12):
// `check(name, value)` throws naming the schema, the path and the rule a value breaks. One
// validator for every test: `validatingFetch` wraps fetch for the openai SDK and checks each
// JSON answer and each streamed event by the route it came from. The file is not part of the
// repository (CI has ../shared beside its clone, a user's clone has not): a test that needs it
// skips with `{ skip: specMissing() }`, which names the file.
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';

// ctest sets K3_SHARED_DIR (the cmake setting of that name, default ../shared beside the sources).
const sharedDir = process.env.K3_SHARED_DIR ?? path.join(process.env.K3_SOURCE_DIR ?? '.', '..', 'shared');
export const specPath = path.resolve(sharedDir, 'data', 'openai-openapi.json');
let ajv = null, schemas = null;

function validator(name) {
  if (!ajv) {
    const spec = JSON.parse(readFileSync(specPath, 'utf8'));
    // OpenAPI 3.0's `nullable` left in a few 3.1 schemas: it admits null (into an `enum` too);
    // Ajv takes the keyword only beside a `type`.
    const walk = (s) => {
      if (Array.isArray(s)) return s.forEach(walk);
      if (!s || typeof s !== 'object') return;
      if (s.nullable === true && Array.isArray(s.enum) && !s.enum.includes(null)) s.enum.push(null);
      if ('nullable' in s && !('type' in s)) delete s.nullable;
      Object.values(s).forEach(walk);
    };
    walk(spec.components);
    schemas = spec.components.schemas;
    ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false });
    ajv.addSchema({ $id: 'openai', components: spec.components }, 'openai');
  }
  return ajv.getSchema(`openai#/components/schemas/${name}`);
}

// For a union with a discriminator (ResponseStreamEvent: anyOf over some 50 events told apart by
// `type`), the one member `value` claims to be, so that a failure names that member's rule
// rather than the first three members' mismatches.
function member(name, value) {
  const s = schemas[name];
  const prop = s?.discriminator?.propertyName;
  if (!prop || !Array.isArray(s.anyOf ?? s.oneOf)) return name;
  for (const ref of s.anyOf ?? s.oneOf) {
    const m = ref.$ref?.split('/').pop();
    const p = schemas[m]?.properties?.[prop];
    if (p && (p.const === value?.[prop] || p.enum?.includes(value?.[prop]))) return m;
  }
  throw new Error(`${name}: no member with ${prop} ${JSON.stringify(value?.[prop])}`);
}

// false when the description is there; else why a test that needs it skips (node:test's `skip`).
export const specMissing = () =>
  existsSync(specPath) ? false : `needs ${specPath} (from ../shared beside the repository, as CI has it): not found`;

// Throws, and says so on stderr too: inside the SDK's fetch a throw becomes a bare
// 'Connection error.'.
export function check(name, value) {
  if (!validator(name)) throw new Error(`no schema ${name} in ${specPath}`);
  const which = member(name, value);
  const v = validator(which);
  if (!v(value)) {
    const e = new Error(`${which}: ${JSON.stringify(v.errors.slice(0, 3))}\nvalue: ${JSON.stringify(value).slice(0, 2000)}`);
    console.error(`openapi.mjs: ${e.message}`);
    throw e;
  }
}

// Which schema the answers of a route follow, whole and streamed.
const routes = [
  [/\/v1\/chat\/completions$/, 'CreateChatCompletionResponse', 'CreateChatCompletionStreamResponse'],
  [/\/v1\/completions$/, 'CreateCompletionResponse', 'CreateCompletionResponse'],
  [/\/v1\/responses$/, 'Response', 'ResponseStreamEvent'],
  [/\/v1\/models$/, 'ListModelsResponse', null],
];

export const checked = { answers: 0, events: 0 };

// The `type` of every member of a union with a discriminator (ResponseStreamEvent: the event
// types a Responses stream may carry), sorted.
export function memberTypes(name) {
  validator(name);
  const s = schemas[name];
  const prop = s.discriminator.propertyName;
  return (s.anyOf ?? s.oneOf).flatMap((ref) => {
    const p = schemas[ref.$ref.split('/').pop()].properties[prop];
    return p.enum ?? [p.const];
  }).sort();
}

// A fetch that validates each answer it hands on (errors against ErrorResponse).
export function validatingFetch(inner = fetch) {
  return async (url, init) => {
    const res = await inner(url, init);
    const route = routes.find(([re]) => re.test(new URL(String(url)).pathname));
    if (!route) {
      // Any other route's errors (a 404 for an unknown one) are OpenAI's error shape too.
      if (!res.ok) {
        check('ErrorResponse', await res.clone().json());
        checked.answers++;
      }
      return res;
    }
    const [, whole, event] = route;
    const text = await res.clone().text();
    if (!res.ok) {
      check('ErrorResponse', JSON.parse(text));
      checked.answers++;
    } else if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      for (const line of text.split('\n')) {
        if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
        check(event, JSON.parse(line.slice(6)));
        checked.events++;
      }
    } else {
      check(whole, JSON.parse(text));
      checked.answers++;
    }
    return res;
  };
}
