// Talking to the daemon: JSON requests with the API key, OpenAI-shaped errors turned into
// ApiError, and Server-Sent Events read from a fetch body (EventSource cannot POST).
import { settings } from './store.js';

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;   // HTTP status; 0 when the server could not be reached
    this.code = code || '';
  }
}

export function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = settings.apiKey();
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

async function errorOf(response) {
  const body = await response.json().catch(() => ({}));
  const e = body.error || {};
  return new ApiError(response.status, e.message || ('HTTP ' + response.status), e.code);
}

// GET or POST JSON; throws ApiError (status 0 when the network failed).
export async function request(path, body, signal) {
  let r;
  try {
    r = await fetch(path, {
      method: body === undefined ? 'GET' : 'POST',
      headers: headers(),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'the server cannot be reached');
  }
  if (!r.ok) throw await errorOf(r);
  return r.json();
}

// POSTs a streaming request and calls onEvent(json) for each `data:` event until [DONE].
// An error event inside the stream is thrown as ApiError.
export async function stream(path, body, onEvent, signal) {
  let r;
  try {
    r = await fetch(path, { method: 'POST', headers: headers(), body: JSON.stringify(body), signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'the server cannot be reached');
  }
  if (!r.ok) throw await errorOf(r);
  const reader = r.body.getReader();
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
      if (!event.startsWith('data: ')) continue;  // (comments and other fields carry no chunk)
      const data = event.slice(6);
      if (data === '[DONE]') return;
      const json = JSON.parse(data);
      if (json.error) throw new ApiError(500, json.error.message, json.error.code);
      onEvent(json);
    }
  }
}
