#!/usr/bin/env python3
"""A fake Hugging Face hub on loopback for the download tests: serves one model repository
made from a local directory, with the metadata route the hub has
(/api/models/OWNER/NAME/revision/REV?blobs=true: commit sha, and per file its size and sha256
for LFS files or git blob id for small ones) and the file route (/OWNER/NAME/resolve/REV/FILE)
with byte ranges and bearer-token checks. Faults are injected per file for the first request:
  --cut FILE:N        close the connection after N bytes (an interrupted transfer)
  --corrupt FILE      flip one byte in the body (a wrong hash)
Prints its port on stdout, then serves until killed. Every request is logged to --log."""
import argparse, hashlib, http.server, json, os, sys, threading

ap = argparse.ArgumentParser()
ap.add_argument('root')
ap.add_argument('--repo', default='acme/tiny-k3')
ap.add_argument('--revision', default='main')
ap.add_argument('--token', default='')
ap.add_argument('--lfs-min', type=int, default=1024, help='files at least this large are LFS files')
ap.add_argument('--cut', action='append', default=[])
ap.add_argument('--corrupt', action='append', default=[])
ap.add_argument('--log', default=os.devnull)
args = ap.parse_args()

files = sorted(os.path.relpath(os.path.join(d, f), args.root)
               for d, _, fs in os.walk(args.root) for f in fs)
def describe(name):
    data = open(os.path.join(args.root, name), 'rb').read()
    entry = {'rfilename': name, 'size': len(data),
             'blobId': hashlib.sha1(b'blob %d\0' % len(data) + data).hexdigest()}
    if len(data) >= args.lfs_min:
        entry['lfs'] = {'sha256': hashlib.sha256(data).hexdigest(), 'size': len(data), 'pointerSize': 134}
    return entry
siblings = [describe(f) for f in files]
commit = hashlib.sha1(json.dumps(siblings, sort_keys=True).encode()).hexdigest()
cuts = {c.rsplit(':', 1)[0]: int(c.rsplit(':', 1)[1]) for c in args.cut}
corrupt = set(args.corrupt)
lock = threading.Lock()
log = open(args.log, 'a', buffering=1)

class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a):
        pass
    def reply(self, status, body, ctype='application/json'):
        body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        auth = self.headers.get('Authorization', '')
        log.write(f'{self.path} range={self.headers.get("Range", "")} auth={"yes" if auth else "no"}\n')
        if args.token and auth != 'Bearer ' + args.token:
            return self.reply(401, {'error': 'Invalid credentials in Authorization header'})
        path = self.path.split('?')[0]
        meta = f'/api/models/{args.repo}/revision/'
        if path.startswith(meta):
            rev = path[len(meta):]
            if rev not in (args.revision, commit):
                return self.reply(404, {'error': f'Invalid rev id: {rev}'})
            return self.reply(200, {'id': args.repo, 'sha': commit, 'siblings': siblings})
        prefix = f'/{args.repo}/resolve/'
        if not path.startswith(prefix):
            return self.reply(404, {'error': 'Repository not found'})
        rev, _, name = path[len(prefix):].partition('/')
        if rev != commit or name not in files:
            return self.reply(404, {'error': 'Entry not found'})
        data = open(os.path.join(args.root, name), 'rb').read()
        start = 0
        rng = self.headers.get('Range')
        if rng:
            start = int(rng.split('=')[1].split('-')[0])
            if start >= len(data):
                return self.reply(416, {'error': 'range not satisfiable'})
        body = data[start:]
        with lock:
            cut = cuts.pop(name, None)
            bad = name in corrupt
            corrupt.discard(name)
        if bad and body:
            body = bytes([body[0] ^ 0xFF]) + body[1:]
        self.send_response(206 if rng else 200)
        self.send_header('Content-Type', 'application/octet-stream')
        self.send_header('Content-Length', str(len(body)))
        if rng:
            self.send_header('Content-Range', f'bytes {start}-{len(data) - 1}/{len(data)}')
        self.end_headers()
        if cut is not None:
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Hub)
print(server.server_address[1], flush=True)
server.serve_forever()
