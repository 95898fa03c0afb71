#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Standalone driver for the local backend: dlopens local.so through the AFM C ABI (ctypes), the way afmd does,
and checks generation, streaming, limits, cancellation, prefix reuse, parallel sequences, tools and failures.
Prints figures. Standard library only.

Usage: driver.py [--so PATH] [--model PATH] [--threads N] [--only NAME[,NAME...]] [--json OUT]
Defaults: <repo>/.build/local-backend/local.so and <cache>/models/smollm2-135m-instruct-q4_1.gguf
(build with scripts/build-local-backend, fetch with scripts/fetch-model). Exit status 0 when every check passed.
"""
import argparse, ctypes as C, json, os, random, sys, tempfile, threading, time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
CACHE = os.environ.get('AFM_CACHE_DIR', os.path.join(REPO, '.cache', 'afm'))

# ---------------------------------------------------------------------------------------------------------------
# The ABI (afm_backend.h), in ctypes
# ---------------------------------------------------------------------------------------------------------------

class Str(C.Structure):
    _fields_ = [('data', C.c_void_p), ('size', C.c_uint64)]

def mkstr(b):
    buf = C.create_string_buffer(b, len(b))
    return Str(C.cast(buf, C.c_void_p), len(b)), buf  # keep buf alive

class Error(C.Structure):
    _fields_ = [('struct_size', C.c_uint32), ('code', C.c_int32), ('message', C.c_char * 512)]

LOG_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_int32, Str)
HOST_EXT_FN = C.CFUNCTYPE(C.c_void_p, C.c_void_p, C.c_char_p)

class HostApi(C.Structure):
    _fields_ = [('struct_size', C.c_uint32), ('abi_major', C.c_uint32), ('abi_minor', C.c_uint32),
                ('reserved0', C.c_uint32), ('host_ctx', C.c_void_p), ('log', LOG_FN), ('get_extension', HOST_EXT_FN)]

class Event(C.Structure):
    _fields_ = [('struct_size', C.c_uint32), ('type', C.c_int32), ('index', C.c_int32), ('code', C.c_int32),
                ('text', Str), ('name', Str), ('input_tokens', C.c_int64), ('output_tokens', C.c_int64),
                ('reasoning_tokens', C.c_int64), ('cached_tokens', C.c_int64)]

EMIT_FN = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.POINTER(Event))

class Sink(C.Structure):
    _fields_ = [('struct_size', C.c_uint32), ('reserved0', C.c_uint32), ('ctx', C.c_void_p), ('emit', EMIT_FN)]

WRITE_FN = C.CFUNCTYPE(None, C.c_void_p, Str)

class Writer(C.Structure):
    _fields_ = [('struct_size', C.c_uint32), ('reserved0', C.c_uint32), ('ctx', C.c_void_p), ('write', WRITE_FN)]

CREATE_FN = C.CFUNCTYPE(C.c_int32, C.POINTER(HostApi), Str, C.POINTER(C.c_void_p), C.POINTER(Error))
DESCRIBE_FN = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.POINTER(Writer), C.POINTER(Error))
GENERATE_FN = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.c_uint64, Str, C.POINTER(Sink), C.POINTER(Error))
CANCEL_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_uint64)
DESTROY_FN = C.CFUNCTYPE(None, C.c_void_p)
GETEXT_FN = C.CFUNCTYPE(C.c_void_p, C.c_void_p, C.c_char_p)

class Vtable(C.Structure):
    _fields_ = [('struct_size', C.c_uint32), ('reserved0', C.c_uint32), ('create', CREATE_FN),
                ('describe', DESCRIBE_FN), ('generate', GENERATE_FN), ('cancel', CANCEL_FN),
                ('destroy', DESTROY_FN), ('get_extension', GETEXT_FN)]

class Info(C.Structure):
    _fields_ = [('struct_size', C.c_uint32), ('abi_major', C.c_uint32), ('abi_minor', C.c_uint32),
                ('reserved0', C.c_uint32), ('id', C.c_char_p), ('version', C.c_char_p), ('vtable', C.POINTER(Vtable))]

COUNT_FN = C.CFUNCTYPE(C.c_int32, C.c_void_p, Str, C.POINTER(C.c_int64), C.POINTER(Error))

class ExtTokenize(C.Structure):
    _fields_ = [('struct_size', C.c_uint32), ('reserved0', C.c_uint32), ('count_input_tokens', COUNT_FN)]

TEXT_DELTA, TOOL_BEGIN, TOOL_ARGS, TOOL_END, REASONING_TEXT, REASONING_STATE, USAGE, DONE, ERROR = 1, 2, 3, 4, 5, 6, 7, 100, 101
FINISH = {0: 'stop', 1: 'length', 2: 'tool_calls', 3: 'cancelled'}
ERRORS = {1: 'invalid_request', 2: 'model_unavailable', 3: 'context_length_exceeded', 4: 'rate_limited',
          5: 'quota_exceeded', 6: 'guardrail_violation', 7: 'refusal', 8: 'unsupported_capability',
          9: 'tool_failed', 10: 'cancelled', 11: 'busy', 12: 'timeout', 13: 'internal', 14: 'incompatible'}

# ---------------------------------------------------------------------------------------------------------------
# Host side
# ---------------------------------------------------------------------------------------------------------------

VERBOSE = False

@LOG_FN
def host_log(ctx, level, msg):
    text = C.string_at(msg.data, msg.size).decode('utf-8', 'replace') if msg.size else ''
    if VERBOSE or level >= 2:
        print(f'  [backend log {["debug", "info", "warning", "error"][max(0, min(level, 3))]}] {text}', file=sys.stderr)

@HOST_EXT_FN
def host_get_extension(ctx, ident):
    return None

GENS = {}
GENS_LOCK = threading.Lock()
NEXT_CTX = [1]


class Gen:
    """One generation as the host sees it: every event, with timestamps."""

    def __init__(self, stop_after_deltas=None, slow_emit_s=0.0):
        self.events = []
        self.text = []
        self.first = self.last = None
        self.t_submit = None
        self.t_terminal = None
        self.finish = None
        self.error = None
        self.usage = None
        self.bad_utf8 = []
        self.calls = {}
        self.after_terminal = 0
        self.stop_after_deltas = stop_after_deltas
        self.t_stop_returned = None
        self.slow_emit_s = slow_emit_s
        self.cond = threading.Condition()
        self.done = threading.Event()
        self.concurrent = 0
        self.in_emit = False

    def on_event(self, ev):
        now = time.perf_counter()
        if self.in_emit:
            self.concurrent += 1
        self.in_emit = True
        try:
            if self.done.is_set():
                self.after_terminal += 1
                return 1
            text = C.string_at(ev.text.data, ev.text.size) if ev.text.size else b''
            name = C.string_at(ev.name.data, ev.name.size) if ev.name.size else b''
            self.events.append((now, ev.type, ev.index, ev.code, text, name))
            if ev.type == TEXT_DELTA:
                try:
                    s = text.decode('utf-8', 'strict')
                except UnicodeDecodeError:
                    self.bad_utf8.append(text)
                    s = text.decode('utf-8', 'replace')
                if self.first is None:
                    self.first = now
                self.last = now
                self.text.append(s)
                with self.cond:
                    self.cond.notify_all()
                if self.slow_emit_s:
                    time.sleep(self.slow_emit_s)
                if self.stop_after_deltas and len(self.text) >= self.stop_after_deltas:
                    self.t_stop_returned = time.perf_counter()
                    return 1
            elif ev.type == TOOL_BEGIN:
                self.calls[ev.index] = {'name': name.decode(), 'id': text.decode(), 'arguments': '', 'ended': False}
                if self.first is None:
                    self.first = now
            elif ev.type == TOOL_ARGS:
                self.calls.setdefault(ev.index, {'name': None, 'id': '', 'arguments': '', 'ended': False})
                self.calls[ev.index]['arguments'] += text.decode('utf-8', 'replace')
            elif ev.type == TOOL_END:
                if ev.index in self.calls:
                    self.calls[ev.index]['ended'] = True
            elif ev.type == USAGE:
                self.usage = dict(input=ev.input_tokens, output=ev.output_tokens, reasoning=ev.reasoning_tokens,
                                  cached=ev.cached_tokens)
            elif ev.type in (DONE, ERROR):
                self.t_terminal = now
                if ev.type == DONE:
                    self.finish = FINISH.get(ev.code, ev.code)
                else:
                    self.error = (ERRORS.get(ev.code, ev.code), text.decode('utf-8', 'replace'))
                self.done.set()
                with self.cond:
                    self.cond.notify_all()
            return 0
        finally:
            self.in_emit = False

    @property
    def output(self):
        return ''.join(self.text)

    def wait_deltas(self, n, timeout=60):
        with self.cond:
            return self.cond.wait_for(lambda: len(self.text) >= n or self.done.is_set(), timeout)


@EMIT_FN
def host_emit(ctx, ev):
    with GENS_LOCK:
        g = GENS.get(ctx)
    if g is None:
        return 1
    return g.on_event(ev.contents)


class Backend:
    def __init__(self, path):
        self.lib = C.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        self.host = HostApi(C.sizeof(HostApi), 1, 0, 0, None, host_log, host_get_extension)
        info = Info()
        info.struct_size = C.sizeof(Info)
        err = Error()
        err.struct_size = C.sizeof(Error)
        negotiate = self.lib.afm_backend_negotiate
        negotiate.restype = C.c_int32
        negotiate.argtypes = [C.POINTER(HostApi), C.POINTER(Info), C.POINTER(Error)]
        rc = negotiate(C.byref(self.host), C.byref(info), C.byref(err))
        if rc != 0:
            raise RuntimeError(f'negotiate failed: {rc} {err.message.decode()}')
        self.id = info.id.decode()
        self.version = info.version.decode()
        self.vt = info.vtable.contents
        self.vt_size = self.vt.struct_size

    def negotiate_major(self, major):
        host = HostApi(C.sizeof(HostApi), major, 0, 0, None, host_log, host_get_extension)
        info = Info()
        info.struct_size = C.sizeof(Info)
        err = Error()
        err.struct_size = C.sizeof(Error)
        rc = self.lib.afm_backend_negotiate(C.byref(host), C.byref(info), C.byref(err))
        return rc, err.message.decode()

    def create(self, settings):
        config = json.dumps({'config_version': 1, 'backend': 'local', 'instance': 'local#1', 'generation': 1,
                             'state_dir': '/tmp/afm-local-test', 'settings': settings}).encode()
        s, keep = mkstr(config)
        out = C.c_void_p()
        err = Error()
        err.struct_size = C.sizeof(Error)
        rc = self.vt.create(C.byref(self.host), s, C.byref(out), C.byref(err))
        if rc != 0:
            return None, (ERRORS.get(rc, rc), err.message.decode())
        return Instance(self, out), None


class Instance:
    def __init__(self, backend, handle):
        self.b = backend
        self.h = handle
        self.next_id = 1
        self.sinks = []

    def describe(self):
        chunks = []

        @WRITE_FN
        def write(ctx, bytes_):
            chunks.append(C.string_at(bytes_.data, bytes_.size))
        w = Writer(C.sizeof(Writer), 0, None, write)
        err = Error()
        err.struct_size = C.sizeof(Error)
        rc = self.b.vt.describe(self.h, C.byref(w), C.byref(err))
        if rc != 0:
            raise RuntimeError(f'describe failed: {rc} {err.message.decode()}')
        return json.loads(b''.join(chunks))

    def generate(self, request, gen=None):
        gen = gen or Gen()
        with GENS_LOCK:
            ctx = NEXT_CTX[0]
            NEXT_CTX[0] += 1
            GENS[ctx] = gen
        body = json.dumps(request).encode() if not isinstance(request, bytes) else request
        s, keep = mkstr(body)
        sink = Sink(C.sizeof(Sink), 0, ctx, host_emit)
        self.sinks.append(sink)
        err = Error()
        err.struct_size = C.sizeof(Error)
        rid = self.next_id
        self.next_id += 1
        gen.request_id = rid
        gen.t_submit = time.perf_counter()
        rc = self.b.vt.generate(self.h, rid, s, C.byref(sink), C.byref(err))
        gen.t_returned = time.perf_counter()
        if rc != 0:
            gen.refused = (ERRORS.get(rc, rc), err.message.decode())
            gen.done.set()
        else:
            gen.refused = None
        return gen

    def cancel(self, rid):
        self.b.vt.cancel(self.h, rid)

    def count_tokens(self, request):
        p = self.b.vt.get_extension(self.h, b'afm.tokenize/1')
        if not p:
            return None, 'no extension'
        ext = C.cast(p, C.POINTER(ExtTokenize)).contents
        body = json.dumps(request).encode()
        s, keep = mkstr(body)
        out = C.c_int64(-1)
        err = Error()
        err.struct_size = C.sizeof(Error)
        rc = ext.count_input_tokens(self.h, s, C.byref(out), C.byref(err))
        if rc != 0:
            return None, (ERRORS.get(rc, rc), err.message.decode())
        return out.value, None

    def destroy(self):
        self.b.vt.destroy(self.h)


# ---------------------------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------------------------

RESULTS = []
FIGURES = {}


def check(name, ok, detail=''):
    RESULTS.append((name, bool(ok), detail))
    print(f'  {"PASS" if ok else "FAIL"}  {name}' + (f'  ({detail})' if detail else ''))
    return ok


def user(text):
    return {'type': 'message', 'role': 'user', 'content': [{'type': 'text', 'text': text}]}


def assistant(text):
    return {'type': 'message', 'role': 'assistant', 'content': [{'type': 'text', 'text': text}]}


def req(model, inp, **kw):
    r = {'request_version': 1, 'response_id': 'resp_test', 'model': model, 'system': [], 'input': inp,
         'tools': [], 'tool_choice': {'mode': 'auto'}, 'parallel_tool_calls': True, 'max_output_tokens': 256,
         'temperature': 0, 'top_p': None, 'reasoning_effort': None, 'stream': True}
    r.update(kw)
    return r


WORDS = ("river stone lantern harbor meadow violet copper orchard signal canyon winter ember falcon "
         "marble thunder cedar glacier saddle whisper compass").split()


def history(n_turns, seed):
    rnd = random.Random(seed)
    items = []
    for i in range(n_turns):
        para = ' '.join(rnd.choice(WORDS) for _ in range(60))
        items.append(user(f'Note {i}: {para}. Summarize it.'))
        items.append(assistant(f'Summary {i}: ' + ' '.join(rnd.choice(WORDS) for _ in range(25))))
    return items


def run_and_wait(inst, request, gen=None, timeout=300):
    g = inst.generate(request, gen)
    if g.refused:
        return g
    if not g.done.wait(timeout):
        raise RuntimeError('generation did not finish in time')
    return g


WEATHER = {'name': 'get_weather', 'description': 'Get the current weather for a city',
           'parameters': {'type': 'object', 'properties': {
               'city': {'type': 'string', 'description': 'The city name'},
               'unit': {'type': 'string', 'enum': ['celsius', 'fahrenheit']}},
               'required': ['city'], 'additionalProperties': False}, 'namespace': None}
TIME = {'name': 'get_time', 'description': 'Get the current time in a timezone',
        'parameters': {'type': 'object', 'properties': {'timezone': {'type': 'string'}}, 'required': ['timezone']},
        'namespace': None}


def valid_against(schema, value):
    """A small JSON Schema subset check (type, properties, required, enum, additionalProperties)."""
    t = schema.get('type')
    if t == 'object':
        if not isinstance(value, dict):
            return False
        props = schema.get('properties', {})
        for k in schema.get('required', []):
            if k not in value:
                return False
        if schema.get('additionalProperties') is False and any(k not in props for k in value):
            return False
        return all(valid_against(props[k], v) for k, v in value.items() if k in props)
    if t == 'string':
        if not isinstance(value, str):
            return False
    if 'enum' in schema and value not in schema['enum']:
        return False
    return True


def test_basics(b, inst, model):
    print('basics')
    rc, msg = b.negotiate_major(2)
    check('negotiate refuses another ABI major', rc == 14 and '2.0' in msg, msg)
    d = inst.describe()
    m = d['models'][0]
    check('describe: available, model id, budgets 3/4 + 1/4', d['available'] and m['id'] == model and
          m['max_input_tokens'] == m['context_tokens'] * 3 // 4 and
          m['max_input_tokens'] + m['max_output_tokens'] == m['context_tokens'], json.dumps(m))
    check('describe: capabilities', m['capabilities'] == {'streaming': True, 'tools': True, 'vision': False,
                                                          'reasoning': False}, json.dumps(m['capabilities']))

    g = run_and_wait(inst, req(model, [user('What is the capital of France? Answer in one short sentence.')],
                               system=['You are a helpful assistant.'], max_output_tokens=48))
    out = g.output
    print(f'    answer: {out!r}')
    check('real answer (mentions Paris)', g.finish == 'stop' and 'paris' in out.lower(), f'finish={g.finish}')
    check('usage has real counts', g.usage and g.usage['input'] > 10 and g.usage['output'] > 0 and
          g.usage['output'] <= 48 and g.usage['reasoning'] == 0, json.dumps(g.usage))
    n, err = inst.count_tokens(req(model, [user('What is the capital of France? Answer in one short sentence.')],
                                   system=['You are a helpful assistant.']))
    check('afm.tokenize/1 counts the templated input exactly', n == g.usage['input'], f'{n} vs {g.usage["input"]}')
    check('generate returns before the generation ends (enqueue only)',
          g.t_returned - g.t_submit < 0.05, f'{(g.t_returned - g.t_submit) * 1000:.2f} ms')

    g = run_and_wait(inst, req(model, [user('Write a long story about a dragon.')], max_output_tokens=5))
    check('max_output_tokens -> DONE length', g.finish == 'length' and g.usage['output'] == 5,
          f'finish={g.finish} usage={g.usage}')

    g = run_and_wait(inst, req(model, [user('Repeat exactly: café naïve 日本語 😀🎉 Привет мир ñ ü ß — “quotes” → ∑ ∞')],
                               max_output_tokens=80))
    print(f'    unicode answer: {g.output!r}')
    non_ascii = sum(1 for ch in g.output if ord(ch) > 127)
    check('streamed deltas are valid UTF-8 (multi-byte output)', not g.bad_utf8 and non_ascii > 0,
          f'{len(g.text)} deltas, {non_ascii} non-ASCII chars, {len(g.bad_utf8)} invalid')
    check('exactly one terminal, none after it, emit never concurrent', g.after_terminal == 0 and g.concurrent == 0)

    g = run_and_wait(inst, req(model, [user('Write a long story about a lighthouse keeper and a storm.')],
                               max_output_tokens=200))
    n = g.usage['output'] if g.usage else 0
    tps = (n - 1) / (g.last - g.first) if n > 1 and g.last > g.first else 0
    FIGURES['decode_tps'] = round(tps, 1)
    FIGURES['decode_tokens'] = n
    check('single-stream decode', tps > 0, f'{tps:.1f} tokens/s over {n} tokens')

    # Sampling: temperature > 0 still answers; top_p accepted.
    g = run_and_wait(inst, req(model, [user('Say hello.')], temperature=0.8, top_p=0.9, max_output_tokens=24))
    check('temperature/top_p sampling', g.finish in ('stop', 'length') and g.usage['output'] > 0, repr(g.output))


def test_cancel(inst, model):
    print('cancellation')
    lat = []
    for _ in range(3):
        g = inst.generate(req(model, [user('Write a very long essay about the history of the world.')],
                              max_output_tokens=1000))
        g.wait_deltas(5)
        t0 = time.perf_counter()
        inst.cancel(g.request_id)
        g.done.wait(10)
        lat.append((g.t_terminal - t0) * 1000 if g.t_terminal else 1e9)
        ok = g.finish == 'cancelled'
    FIGURES['cancel_latency_ms'] = round(max(lat), 2)
    check('cancel() -> DONE cancelled within 50 ms', ok and max(lat) < 50, 'latencies ' + ', '.join(f'{x:.2f} ms' for x in lat))

    g = run_and_wait(inst, req(model, [user('Write a very long essay about the oceans.')], max_output_tokens=1000),
                     Gen(stop_after_deltas=5))
    l2 = (g.t_terminal - g.t_stop_returned) * 1000 if g.t_terminal and g.t_stop_returned else 1e9
    FIGURES['emit_stop_latency_ms'] = round(l2, 2)
    check('emit() != 0 -> DONE cancelled within 50 ms', g.finish == 'cancelled' and l2 < 50 and
          g.usage is not None, f'{l2:.2f} ms, usage={g.usage}')

    inst.cancel(999999)  # unknown id: harmless
    check('cancel of an unknown id is harmless', True)
    # The slot is free again: a new request completes.
    g = run_and_wait(inst, req(model, [user('Say yes.')], max_output_tokens=8))
    check('backend serves after cancellations', g.finish in ('stop', 'length'))


def test_prefix(inst, model):
    print('prefix reuse (stateless, full history resent)')
    seed = random.randrange(1 << 30)
    h = history(9, seed)
    q1 = [user('What was note 3 about?')]
    g1 = run_and_wait(inst, req(model, h + q1, max_output_tokens=16))
    cold = (g1.first - g1.t_submit) * 1000
    h2 = h + q1 + [assistant(g1.output or 'ok'), user('And note 5?')]
    g2 = run_and_wait(inst, req(model, h2, max_output_tokens=16))
    warm = (g2.first - g2.t_submit) * 1000
    FIGURES.update(prompt_tokens=g1.usage['input'], ttft_cold_ms=round(cold, 1), ttft_warm_ms=round(warm, 1),
                   warm_ratio=round(warm / cold, 3), cached_tokens_warm=g2.usage['cached'])
    print(f'    prompt {g1.usage["input"]} tokens; TTFT cold {cold:.1f} ms, warm {warm:.1f} ms '
          f'(ratio {warm / cold:.3f}); cached {g2.usage["cached"]} of {g2.usage["input"]}')
    check('cold request reuses at most the shared system prompt', g1.usage['cached'] < g1.usage['input'] * 0.1,
          json.dumps(g1.usage))
    check('next turn reuses the prefix (cached_tokens > 0)', g2.usage['cached'] > g1.usage['input'] * 0.9,
          json.dumps(g2.usage))
    check('next turn TTFT much lower (ratio < 0.25)', warm / cold < 0.25, f'{warm / cold:.3f}')


def test_parallel(inst, model):
    print('parallel sequences')
    gens = []
    t0 = time.perf_counter()
    for i in range(4):
        gens.append(inst.generate(req(model, [user(f'Tell story number {i} about a {WORDS[i]}.')],
                                      max_output_tokens=128)))
    for g in gens:
        g.done.wait(300)
    wall = max(g.t_terminal for g in gens) - t0
    total = sum(g.usage['output'] for g in gens)
    FIGURES['agg4_tps'] = round(total / wall, 1)
    check('4 parallel generations all complete', all(g.finish in ('stop', 'length') for g in gens),
          f'{total} tokens in {wall:.2f} s = {total / wall:.1f} tokens/s aggregate')
    # Overlap: every stream had produced a delta before the first one finished (batched, not one after another).
    first_end = min(g.t_terminal for g in gens)
    check('the 4 streams decode concurrently', all(g.first and g.first < first_end for g in gens))

    # More requests than slots: the extra ones wait for a slot and still complete.
    gens = [inst.generate(req(model, [user(f'Count to {i + 3}.')], max_output_tokens=24)) for i in range(7)]
    for g in gens:
        g.done.wait(300)
    check('7 requests on 4 slots all complete', all(g.finish in ('stop', 'length') for g in gens),
          ', '.join(str(g.finish) for g in gens))

    # A slow consumer (blocking emit) does not stall the others.
    slow = inst.generate(req(model, [user('Write a long poem about rain.')], max_output_tokens=100),
                         Gen(slow_emit_s=0.05))
    fast = run_and_wait(inst, req(model, [user('Write a short poem about snow.')], max_output_tokens=60))
    slow_done_early = slow.done.is_set()
    check('a blocked consumer does not stall other sequences',
          fast.finish in ('stop', 'length') and not slow_done_early,
          f'fast finished in {fast.t_terminal - fast.t_submit:.2f} s while the slow one had {len(slow.text)} deltas')
    inst.cancel(slow.request_id)
    slow.done.wait(10)
    check('the slow consumer is cancelled promptly', slow.finish == 'cancelled', str(slow.finish))


def test_tools(inst, model):
    print('tools')
    r = req(model, [user('What is the weather in Paris?')], tools=[WEATHER], tool_choice={'mode': 'required'},
            max_output_tokens=128)
    g = run_and_wait(inst, r)
    if g.refused:
        check('tool_choice required -> tool call', False, str(g.refused))
        return
    call = g.calls.get(0)
    print(f'    required: finish={g.finish} calls={g.calls} text={g.output!r} error={g.error}')
    args = None
    try:
        args = json.loads(call['arguments']) if call else None
    except ValueError:
        pass
    check('required: a tool call, DONE tool_calls', g.finish == 'tool_calls' and call and call['ended'] and
          call['name'] == 'get_weather' and call['id'] and all(c['ended'] for c in g.calls.values()), str(g.calls))
    check('required: arguments parse and match the schema', args is not None and valid_against(WEATHER['parameters'], args),
          call['arguments'] if call else '')

    r = req(model, [user('What time is it in Tokyo?')], tools=[WEATHER, TIME],
            tool_choice={'mode': 'function', 'name': 'get_time'}, max_output_tokens=128)
    g = run_and_wait(inst, r)
    call = g.calls.get(0)
    print(f'    named: finish={g.finish} calls={g.calls} error={g.error}')
    try:
        args = json.loads(call['arguments']) if call else None
    except ValueError:
        args = None
    check('named function: forced call of that function', g.finish == 'tool_calls' and call and
          call['name'] == 'get_time' and args is not None and valid_against(TIME['parameters'], args), str(g.calls))

    r = req(model, [user('What is the weather in Paris and in London? Call the tool for each city.')],
            tools=[WEATHER], tool_choice={'mode': 'required'}, parallel_tool_calls=False, max_output_tokens=160)
    g = run_and_wait(inst, r)
    print(f'    parallel_tool_calls false: finish={g.finish} calls={g.calls}')
    check('parallel_tool_calls false -> at most one call', g.finish == 'tool_calls' and len(g.calls) == 1, str(g.calls))

    r = req(model, [user('What is the weather in Berlin?')], tools=[WEATHER], tool_choice={'mode': 'auto'},
            max_output_tokens=128)
    g = run_and_wait(inst, r)
    print(f'    auto: finish={g.finish} calls={g.calls} text={g.output!r} error={g.error}')
    ok = g.finish == 'stop' or (g.finish == 'tool_calls' and all(
        valid_against(WEATHER['parameters'], json.loads(c['arguments'])) for c in g.calls.values()))
    check('auto: text or a valid tool call', ok, f'finish={g.finish}')

    # Two earlier calls in the history show the model the format; greedy decoding then calls the tool, which
    # exercises the lazy grammar (free text until the <tool_call> trigger, constrained after it).
    def earlier(cid, city):
        return [{'type': 'function_call', 'call_id': cid, 'name': 'get_weather', 'arguments': json.dumps({'city': city}),
                 'namespace': None},
                {'type': 'function_call_output', 'call_id': cid, 'output': '{"sky": "sunny"}'}]
    few_shot = ([user('Weather in Rome?')] + earlier('c1', 'Rome') + [assistant('Sunny in Rome.'), user('Weather in Oslo?')] +
                earlier('c2', 'Oslo') + [assistant('Sunny in Oslo.'), user('Weather in Berlin?')])
    g = run_and_wait(inst, req(model, few_shot, tools=[WEATHER], tool_choice={'mode': 'auto'}, max_output_tokens=128))
    print(f'    auto after examples: finish={g.finish} calls={g.calls} text={g.output!r}')
    call = g.calls.get(0)
    check('auto (lazy grammar): the triggered call parses and matches the schema',
          g.finish == 'tool_calls' and call and call['ended'] and
          valid_against(WEATHER['parameters'], json.loads(call['arguments'])), str(g.calls))

    r = req(model, [user('What is the weather in Berlin?')], tools=[WEATHER], tool_choice={'mode': 'none'},
            max_output_tokens=64)
    g = run_and_wait(inst, r)
    check('none: text only', g.finish in ('stop', 'length') and not g.calls, f'finish={g.finish} text={g.output!r}')

    r = req(model, [user('What is the weather in Paris?'),
                    {'type': 'function_call', 'call_id': 'call_1', 'name': 'get_weather', 'arguments': '{"city":"Paris"}',
                     'namespace': None},
                    {'type': 'function_call_output', 'call_id': 'call_1', 'output': '{"temperature_c": 21, "sky": "sunny"}'}],
            tools=[WEATHER], tool_choice={'mode': 'none'}, max_output_tokens=64)
    g = run_and_wait(inst, r)
    print(f'    after function_call_output: {g.output!r}')
    check('after a function_call_output the model continues with text', g.finish in ('stop', 'length') and
          g.output.strip() != '' and not g.calls, f'finish={g.finish}')
    r['tool_choice'] = {'mode': 'auto'}
    g = run_and_wait(inst, r)
    print(f'    after function_call_output (auto): finish={g.finish} text={g.output!r} calls={g.calls}')
    check('after a function_call_output (auto) the answer is well formed', g.finish in ('stop', 'length', 'tool_calls')
          and g.error is None, f'finish={g.finish}')


def test_bad_input(b, inst, model):
    print('bad input')
    for body, code, what in [
            (b'{not json', 'invalid_request', 'malformed JSON'),
            (b'[1,2]', 'invalid_request', 'not an object'),
            (b'{"request_version":2,"model":"x","input":[]}', 'incompatible', 'request_version 2'),
            (json.dumps(req('no-such-model', [user('hi')])).encode(), 'model_unavailable', 'unknown model'),
            (json.dumps(req(model, [{'type': 'message', 'role': 'user', 'content': [
                {'type': 'image', 'mime_type': 'image/png', 'data_base64': 'AA=='}]}])).encode(),
             'unsupported_capability', 'image input'),
            (json.dumps(req(model, [user('hi')], temperature='hot')).encode(), 'invalid_request', 'temperature type'),
            (json.dumps(req(model, [user('hi')], max_output_tokens=0)).encode(), 'invalid_request', 'max_output_tokens 0'),
            (json.dumps(req(model, [user('hi')], tool_choice={'mode': 'required'})).encode(), 'invalid_request',
             'required without tools'),
            (json.dumps(req(model, [user('word ' * 4000)])).encode(), 'context_length_exceeded', 'input over budget'),
            (b'[' * 100000, 'invalid_request', 'deeply nested'),
            (b'', 'invalid_request', 'empty')]:
        g = inst.generate(body)
        check(f'refused: {what} -> {code}', g.refused and g.refused[0] == code, str(g.refused))
    bad, err = b.create({'Modell': '/x'})
    check('unknown setting -> create fails invalid_request', bad is None and err[0] == 'invalid_request', str(err))
    bad, err = b.create({'ContextTokens': 'lots'})
    check('bad ContextTokens -> create fails invalid_request', bad is None and err[0] == 'invalid_request', str(err))


def test_failures(b):
    print('model failures (the backend loads, describes why, refuses generation)')
    cases = [('/nonexistent/model.gguf', 'model_missing')]
    tmp = tempfile.mkdtemp(prefix='afm-local-test-')
    notgguf = os.path.join(tmp, 'text.gguf')
    with open(notgguf, 'w') as f:
        f.write('this is not a model\n')
    cases.append((notgguf, 'model_invalid'))
    corrupt = os.path.join(tmp, 'corrupt.gguf')
    with open(corrupt, 'wb') as f:
        f.write(b'GGUF' + bytes([3, 0, 0, 0]) + os.urandom(4096))
    cases.append((corrupt, 'model_invalid'))
    cases.append((None, 'model_missing'))
    for path, code in cases:
        inst, err = b.create({'Model': path} if path else {})
        if inst is None:
            check(f'{path}: create succeeds', False, str(err))
            continue
        d = inst.describe()
        print(f'    {path}: available={d["available"]} reason_code={d["reason_code"]} reason={d["reason"]!r}')
        check(f'{os.path.basename(path or "(no Model)")}: describe available:false, reason_code {code}',
              d['available'] is False and d['reason_code'] == code and d['reason'])
        g = inst.generate(req(d['models'][0]['id'], [user('hi')]))
        check(f'{os.path.basename(path or "(no Model)")}: generate refused model_unavailable',
              g.refused and g.refused[0] == 'model_unavailable', str(g.refused))
        n, e = inst.count_tokens(req(d['models'][0]['id'], [user('hi')]))
        check(f'{os.path.basename(path or "(no Model)")}: tokenize refused model_unavailable',
              n is None and e[0] == 'model_unavailable', str(e))
        inst.destroy()


def main():
    global VERBOSE
    ap = argparse.ArgumentParser()
    ap.add_argument('--so', default=os.path.join(REPO, '.build', 'local-backend', 'local.so'))
    ap.add_argument('--model', default=os.path.join(CACHE, 'models', 'smollm2-135m-instruct-q4_1.gguf'))
    ap.add_argument('--threads', default=None)
    ap.add_argument('--only', default=None)
    ap.add_argument('--json', default=None)
    ap.add_argument('--verbose', action='store_true')
    a = ap.parse_args()
    VERBOSE = a.verbose
    only = set(a.only.split(',')) if a.only else None

    def want(name):
        return only is None or name in only

    b = Backend(a.so)
    print(f'loaded {a.so}: backend {b.id} {b.version}, vtable {b.vt_size} bytes')
    settings = {'Model': a.model}
    if a.threads:
        settings['Threads'] = a.threads
    t0 = time.perf_counter()
    inst, err = b.create(settings)
    if inst is None:
        print(f'create failed: {err}')
        return 1
    FIGURES['create_ms'] = round((time.perf_counter() - t0) * 1000, 1)
    model = inst.describe()['models'][0]['id']
    print(f'created in {FIGURES["create_ms"]} ms, model id {model}')
    try:
        if want('basics'): test_basics(b, inst, model)
        if want('cancel'): test_cancel(inst, model)
        if want('prefix'): test_prefix(inst, model)
        if want('parallel'): test_parallel(inst, model)
        if want('tools'): test_tools(inst, model)
        if want('bad'): test_bad_input(b, inst, model)
    finally:
        t0 = time.perf_counter()
        inst.destroy()
        FIGURES['destroy_ms'] = round((time.perf_counter() - t0) * 1000, 1)
    if want('failures'): test_failures(b)
    failed = [r for r in RESULTS if not r[1]]
    print()
    print('figures: ' + json.dumps(FIGURES))
    print(f'{len(RESULTS) - len(failed)} passed, {len(failed)} failed')
    for name, _, detail in failed:
        print(f'  FAILED: {name} {detail}')
    if a.json:
        with open(a.json, 'w') as f:
            json.dump({'figures': FIGURES, 'results': [{'name': n, 'ok': o, 'detail': d} for n, o, d in RESULTS]}, f)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
