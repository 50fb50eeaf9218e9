// Images through the official SDKs against the real daemon (`k3serve serve`) on the tiny
// synthetic model, whose make-model checkpoint carries a small vision tower (docs/api.md
// "Images"): the `openai` package sends a PNG as a chat image_url data: URL and as a Responses
// input_image, the `@anthropic-ai/sdk` package as a base64 image block; each is answered, counts
// the image's rows in its prompt, and the second sending of the same image resumes from the
// prompt cache. A remote URL comes back as the SDK's BadRequestError.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { deflateSync } from 'node:zlib';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startDaemon } from './daemon.mjs';

let daemon, openai, anthropic, model;
before(async () => {
  daemon = await startDaemon('tiny');
  openai = new OpenAI({ baseURL: daemon.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: daemon.url, apiKey: 'unused', maxRetries: 0 });
  model = (await openai.models.list()).data[0].id;
});
after(async () => { assert.equal(await daemon.stop(), 0); });

// A w x h RGB PNG (a gradient), written here: signature, IHDR, one zlib IDAT, IEND.
function png(w, h) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const sum = Buffer.alloc(4); sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; ihdr[9] = 2;  // 8-bit RGB
  const raw = Buffer.alloc(h * (1 + 3 * w));
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) {
      const at = y * (1 + 3 * w) + 1 + 3 * x;
      raw[at] = (x * 4) & 255; raw[at + 1] = (y * 4) & 255; raw[at + 2] = ((x + y) * 2) & 255;
    }
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

const image = png(64, 48);  // padded to 84x56: 6x4 patches, 6 rows
const dataUrl = 'data:image/png;base64,' + image.toString('base64');
const question = 'What is in this picture?';

test('openai chat: an image_url part is answered, counted with its rows, and resumed from the cache', async () => {
  const text = await openai.chat.completions.create({
    model, messages: [{ role: 'user', content: question }], max_tokens: 4, temperature: 0 });
  const messages = [{ role: 'user', content: [
    { type: 'text', text: question }, { type: 'image_url', image_url: { url: dataUrl } }] }];
  const first = await openai.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 });
  assert.equal(first.choices[0].message.role, 'assistant');
  assert.ok(first.usage.completion_tokens >= 1);
  // 6 rows, <|media_begin|> <|media_content|> <|media_end|>, and "image 64x48"
  const sizeText = (await (await fetch(daemon.url + '/tokenize', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ content: 'image 64x48' }) })).json()).count;
  assert.equal(first.usage.prompt_tokens, text.usage.prompt_tokens + 6 + 3 + sizeText);
  const again = await openai.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 });
  assert.ok(again.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1);
  assert.equal(again.choices[0].message.content, first.choices[0].message.content);

  // streamed, the same answer
  const stream = await openai.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, stream: true });
  let streamed = '';
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(streamed, first.choices[0].message.content);

  await assert.rejects(
    openai.chat.completions.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] }] }),
    (e) => e instanceof OpenAI.BadRequestError && /fetches nothing/.test(e.message));
});

test('openai responses: an input_image is the same prompt', async () => {
  const chat = await openai.chat.completions.create({ model, max_tokens: 4, temperature: 0, messages: [
    { role: 'user', content: [{ type: 'text', text: question }, { type: 'image_url', image_url: { url: dataUrl } }] }] });
  const r = await openai.responses.create({ model, max_output_tokens: 4, temperature: 0, input: [
    { role: 'user', content: [{ type: 'input_text', text: question }, { type: 'input_image', image_url: dataUrl, detail: 'auto' }] }] });
  assert.equal(r.status === 'completed' || r.status === 'incomplete', true);
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
});

test('anthropic messages: a base64 image block is answered and counted like the chat image', async () => {
  const chat = await openai.chat.completions.create({ model, max_tokens: 4, temperature: 0, messages: [
    { role: 'user', content: [{ type: 'text', text: question }, { type: 'image_url', image_url: { url: dataUrl } }] }] });
  const content = [{ type: 'text', text: question },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: image.toString('base64') } }];
  const m = await anthropic.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content }] });
  assert.equal(m.role, 'assistant');
  assert.equal(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0), chat.usage.prompt_tokens);
  const counted = await anthropic.messages.countTokens({ model, messages: [{ role: 'user', content }] });
  assert.equal(counted.input_tokens, chat.usage.prompt_tokens);
  await assert.rejects(
    anthropic.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } }] }] }),
    (e) => e instanceof Anthropic.BadRequestError && /fetches nothing/.test(e.message));
});
