// k3serve web UI: a small chat client for /v1/chat/completions with streaming (SSE over fetch),
// a stop button (aborting the request cancels the job on the server), optional thinking
// (reasoning shown separately) and an optional API key kept in localStorage. No build step.
'use strict';

const $ = (id) => document.getElementById(id);
const conversation = [];          // {role, content} of the conversation so far
let controller = null;       // AbortController of the request in flight
let modelId = null;

function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = $('api-key').value.trim();
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

function setStatus(text, cls) {
  const s = $('status');
  s.textContent = text;
  s.className = 'status ' + (cls || '');
}

function addMessage(role, text) {
  const div = document.createElement('div');
  div.className = 'msg ' + role;
  const reasoning = document.createElement('div');
  reasoning.className = 'reasoning';
  const content = document.createElement('div');
  content.className = 'content';
  content.textContent = text || '';
  div.append(reasoning, content);
  $('messages').append(div);
  div.scrollIntoView({ block: 'end' });
  return { div, reasoning, content };
}

// Polls /health until the model is loaded, then reads the model id.
async function waitUntilReady() {
  for (;;) {
    try {
      const r = await fetch('/health');
      if (r.ok) break;
      const body = await r.json().catch(() => ({}));
      setStatus((body.error && body.error.message) || 'loading…');
    } catch (e) {
      setStatus('server unreachable', 'error');
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
  try {
    const r = await fetch('/v1/models', { headers: headers() });
    const body = await r.json();
    if (r.ok) modelId = body.data[0].id;
  } catch (e) { /* the model id is optional */ }
  setStatus('ready' + (modelId ? ' · ' + modelId : ''), 'ready');
}

// Reads an SSE body and calls onEvent(json) for each data: event until [DONE].
async function readSse(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith('data: ')) continue;  // ": ping" comments
      const data = event.slice(6);
      if (data === '[DONE]') return;
      onEvent(JSON.parse(data));
    }
  }
}

async function send(text) {
  conversation.push({ role: 'user', content: text });
  addMessage('user', text);
  const out = addMessage('assistant', '');
  let answer = '';
  let reasoning = '';
  const started = performance.now();
  let firstTokenAt = null;
  let usage = null;
  controller = new AbortController();
  $('send').disabled = true;
  $('stop').disabled = false;
  const body = {
    messages: conversation,
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($('temperature').value),
    max_completion_tokens: Number($('max-tokens').value),
    thinking: $('thinking').checked,
  };
  if (modelId) body.model = modelId;
  try {
    const r = await fetch('/v1/chat/completions', {
      method: 'POST', headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    if (!r.ok) {
      const err = await r.json().catch(() => ({}));
      throw new Error((err.error && err.error.message) || ('HTTP ' + r.status));
    }
    await readSse(r, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) return;
      const d = choice.delta || {};
      if (d.content || d.reasoning_content) firstTokenAt = firstTokenAt || performance.now();
      if (d.reasoning_content) { reasoning += d.reasoning_content; out.reasoning.textContent = reasoning; }
      if (d.content) { answer += d.content; out.content.textContent = answer; }
      out.div.scrollIntoView({ block: 'end' });
    });
    conversation.push({ role: 'assistant', content: answer });
  } catch (e) {
    if (e.name === 'AbortError') {
      out.content.textContent = answer + ' [stopped]';
      conversation.push({ role: 'assistant', content: answer });
    } else {
      out.div.classList.add('error');
      out.content.textContent = answer + (answer ? '\n' : '') + 'Error: ' + e.message;
      conversation.pop();  // the user turn failed; let them retry it
    }
  } finally {
    controller = null;
    $('send').disabled = false;
    $('stop').disabled = true;
    const secs = (performance.now() - started) / 1000;
    if (usage) {
      const ttft = firstTokenAt ? ((firstTokenAt - started) / 1000).toFixed(2) + ' s to first token · ' : '';
      $('stats').textContent = ttft + usage.completion_tokens + ' tokens in ' + secs.toFixed(2) + ' s · ' +
        usage.prompt_tokens + ' prompt tokens (' + usage.prompt_tokens_details.cached_tokens + ' reused)';
    }
  }
}

$('composer').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('input').value.trim();
  if (!text || controller) return;
  $('input').value = '';
  send(text);
});
$('input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
});
$('stop').addEventListener('click', () => { if (controller) controller.abort(); });
$('clear').addEventListener('click', () => {
  if (controller) controller.abort();
  conversation.length = 0;
  $('messages').textContent = '';
  $('stats').textContent = '';
});
$('api-key').value = localStorage.getItem('k3serve-api-key') || '';
$('api-key').addEventListener('change', () => localStorage.setItem('k3serve-api-key', $('api-key').value.trim()));

waitUntilReady();
