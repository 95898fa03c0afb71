#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A minimal Responses-API (SSE) front for local.so, so ../../../../shared/bench/bench_generation.py can compare
the backend with llama-server over HTTP before afmd serves it. Not a gateway: text input only, streaming only,
no validation beyond what the benchmark sends. Standard library only.

Usage: bench_shim.py [--so PATH] [--model PATH] [--port 18090] [--threads N]
  then: bench_generation.py http://127.0.0.1:18090/v1 <model id>
"""
import argparse, http.server, json, os, queue, socketserver, sys, threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import driver as D  # noqa: E402  (the ctypes host of the test driver)


def to_items(inp):
    if isinstance(inp, str):
        return [D.user(inp)]
    items = []
    for it in inp:
        if it.get('type', 'message') == 'message':
            content = it.get('content')
            if isinstance(content, str):
                text = content
            else:
                text = '\n'.join(p.get('text', '') for p in content if p.get('type') in ('input_text', 'output_text'))
            items.append({'type': 'message', 'role': it['role'], 'content': [{'type': 'text', 'text': text}]})
    return items


class StreamGen(D.Gen):
    """A Gen that also forwards deltas to a queue for the HTTP handler."""

    def __init__(self):
        super().__init__()
        self.q = queue.Queue()

    def on_event(self, ev):
        rc = super().on_event(ev)
        if ev.type == D.TEXT_DELTA:
            self.q.put(('delta', self.text[-1]))
        elif ev.type in (D.DONE, D.ERROR):
            self.q.put(('end', None))
        return rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--so', default=os.path.join(D.REPO, '.build', 'local-backend', 'local.so'))
    ap.add_argument('--model', default=os.path.join(D.CACHE, 'models', 'smollm2-135m-instruct-q4_1.gguf'))
    ap.add_argument('--port', type=int, default=18090)
    ap.add_argument('--threads', default=None)
    a = ap.parse_args()
    backend = D.Backend(a.so)
    settings = {'Model': a.model}
    if a.threads:
        settings['Threads'] = a.threads
    inst, err = backend.create(settings)
    if inst is None:
        sys.exit(f'create failed: {err}')
    model_id = inst.describe()['models'][0]['id']
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get('Content-Length', 0))))
            request = D.req(model_id, to_items(body.get('input', '')),
                            max_output_tokens=body.get('max_output_tokens') or 1024,
                            temperature=body.get('temperature'), top_p=body.get('top_p'))
            g = StreamGen()
            with lock:  # the ctypes host's request ids are not thread-safe
                inst.generate(request, g)
            if g.refused:
                self.send_response(400)
                data = json.dumps({'error': g.refused}).encode()
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200)
            self.send_header('Content-Type', 'text/event-stream')
            self.send_header('Connection', 'close')
            self.end_headers()
            self.wfile.write(b'data: {"type":"response.created"}\n\n')
            while True:
                kind, text = g.q.get()
                if kind == 'delta':
                    self.wfile.write(b'data: ' + json.dumps({'type': 'response.output_text.delta', 'delta': text}).encode() + b'\n\n')
                    self.wfile.flush()
                else:
                    break
            u = g.usage or {}
            usage = {'input_tokens': u.get('input'), 'output_tokens': u.get('output'),
                     'input_tokens_details': {'cached_tokens': u.get('cached')}}
            kind = 'response.completed' if g.finish == 'stop' else 'response.incomplete'
            self.wfile.write(b'data: ' + json.dumps({'type': kind, 'response': {'usage': usage}}).encode() + b'\n\n')
            self.wfile.flush()
            self.close_connection = True

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    print(f'serving {model_id} on http://127.0.0.1:{a.port}/v1/responses', flush=True)
    Server(('127.0.0.1', a.port), Handler).serve_forever()


if __name__ == '__main__':
    main()
