"The shared language-model clients: an OpenAI-compatible endpoint (against a local stub) and Gemma 3 270M offline."
import http.server
import importlib.util
import json
import threading

import numpy as np
import pytest

from iclr25_nb import llm
from iclr25_nb.llm import OpenAIClient, ResponseCache, check_messages, from_env, local_available

HI = [{'role': 'user', 'content': 'hi'}]


class _Stub(http.server.BaseHTTPRequestHandler):
    "Answers by the model name: 'ok' echoes, 'flaky' fails twice with 503 then echoes, 'bad' returns no message."
    seen = []
    flaky = 0

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        _Stub.seen.append(req)
        if req['model'] == 'flaky' and _Stub.flaky < 2:
            _Stub.flaky += 1
            return self._send(503, b'overloaded')
        if req['model'] == 'missing': return self._send(404, b'{"error": "model not found"}')
        if req['model'] == 'bad': return self._send(200, json.dumps({'error': 'nope'}).encode())
        out = {'choices': [{'message': {'content': 'echo ' + req['messages'][-1]['content']}}],
               'usage': {'prompt_tokens': 5, 'completion_tokens': 2}}
        self._send(200, json.dumps(out).encode())

    def _send(self, code, body):
        self.send_response(code); self.send_header('Content-Type', 'application/json'); self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a): pass


@pytest.fixture(scope='module')
def stub():
    srv = http.server.HTTPServer(('127.0.0.1', 0), _Stub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f'http://127.0.0.1:{srv.server_port}/v1'
    srv.shutdown()


def test_reply_tokens_and_request(stub):
    c = OpenAIClient(stub, 'ok', max_tokens=7)
    assert c(HI) == 'echo hi'
    assert _Stub.seen[-1] == {'model': 'ok', 'messages': HI, 'max_tokens': 7, 'temperature': 0.0}
    assert c.stats() == dict(calls=1, cache_hits=0, retries=0, failures=0, prompt_tokens=5, completion_tokens=2)


def test_transient_errors_are_retried(stub):
    _Stub.flaky = 0
    c = OpenAIClient(stub, 'flaky', retries=2, backoff=0.01)
    assert c(HI) == 'echo hi'
    assert (c.retries, c.calls, c.failures) == (2, 1, 0)
    _Stub.flaky = 0
    c = OpenAIClient(stub, 'flaky', retries=1, backoff=0.01)
    with pytest.raises(ConnectionError, match='2 attempt'): c(HI)
    assert c.failures == 1


def test_client_errors_fail_at_once(stub):
    c = OpenAIClient(stub, 'missing', retries=3, backoff=0.01)
    with pytest.raises(ValueError, match='HTTP 404.*model not found'): c(HI)
    assert c.retries == 0
    with pytest.raises(ValueError, match='not a chat-completions reply'): OpenAIClient(stub, 'bad')(HI)


def test_unreachable_endpoint_names_the_url():
    c = OpenAIClient('http://127.0.0.1:9/v1', 'x', retries=1, backoff=0.01, timeout=2)
    with pytest.raises(ConnectionError, match=r'127\.0\.0\.1:9/v1/chat/completions'): c(HI)


def test_cache_serves_repeats_and_survives_a_crash(stub, tmp_path):
    path = tmp_path / 'replies.jsonl'
    c = OpenAIClient(stub, 'ok', cache=ResponseCache(path))
    n = len(_Stub.seen)
    assert c(HI) == c(HI) == 'echo hi'
    assert (c.calls, c.cache_hits, len(_Stub.seen) - n) == (1, 1, 1)
    other = OpenAIClient(stub, 'ok', temperature=0.7, cache=ResponseCache(path))   # other settings: not a hit
    other(HI)
    assert other.cache_hits == 0
    with open(path, 'a') as f: f.write('{"key": "trunc')                          # a write cut short
    again = OpenAIClient(stub, 'ok', cache=ResponseCache(path))
    assert again(HI) == 'echo hi' and again.calls == 0 and again.cache_hits == 1


def test_corrupt_cache_is_an_error(tmp_path):
    path = tmp_path / 'c.jsonl'
    path.write_text('not json\n{"key": "a", "reply": "b"}\n')
    with pytest.raises(ValueError, match=r'c\.jsonl: line 1'): ResponseCache(path)


def test_bad_input():
    with pytest.raises(ValueError, match='http'): OpenAIClient('localhost:8000', 'm')
    with pytest.raises(ValueError, match='non-empty list'): check_messages([])
    with pytest.raises(ValueError, match=r"messages\[0\].*'role'"): check_messages([{'content': 'x'}])
    with pytest.raises(ValueError, match='content must be text'): check_messages([{'role': 'user', 'content': 3}])


def test_from_env(monkeypatch):
    monkeypatch.delenv('ICLR25_LLM_BASE_URL', raising=False)
    assert from_env() is None
    monkeypatch.setenv('ICLR25_LLM_BASE_URL', 'http://127.0.0.1:1/v1')
    monkeypatch.setenv('ICLR25_LLM_MODEL', 'gpt-x')
    c = from_env(max_tokens=9)
    assert (c.url, c.model, c.max_tokens) == ('http://127.0.0.1:1/v1/chat/completions', 'gpt-x', 9)


def test_without_the_extra_it_says_why(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: None if name == 'llama_cpp' else real(name, *a))
    ok, why = local_available()
    assert not ok and 'llama-cpp-python' in why and "iclr25_nb[llm]" in why
    with pytest.raises(llm.Unavailable, match='llama-cpp-python'): llm.LocalLLM()


local = pytest.mark.skipif(not local_available()[0], reason=local_available()[1] or 'ok')


@local
def test_local_model_scores_options():
    g = llm.local_llm()
    lp = g.option_logprobs('The capital of France is', [' Paris', ' banana', ' Paris, the city of light'])
    assert lp.shape == (3,) and np.all(np.isfinite(lp)) and np.all(lp < 0)
    assert lp[0] > lp[1] + 2                      # a model that knows nothing would not prefer Paris
    assert lp[2] < lp[0]                          # a longer continuation includes the first token's cost
    again = g.option_logprobs('The capital of France is', [' banana', ' Paris'])   # reordered: the cache is reused
    np.testing.assert_allclose(again, lp[[1, 0]], atol=1e-3)


@local
def test_local_model_answers():
    g = llm.local_llm()
    assert '4' in g([{'role': 'user', 'content': 'What is 2+2?'}])            # a plain transcript, continued
    text = g.complete('1, 2, 3, 4,', max_tokens=4)
    assert '5' in text


@local
@pytest.mark.skipif(importlib.util.find_spec('uvicorn') is None, reason="llama-cpp-python's server extra missing")
def test_local_server_speaks_openai():
    with llm.local_server(max_tokens=8) as client:
        reply = client([{'role': 'user', 'content': 'Say hi.'}])
    # the pretrained 270M model answers its chat template with little or nothing: the point is the code path
    assert isinstance(reply, str) and client.calls == 1 and client.prompt_tokens > 0 and client.failures == 0


@local
def test_local_model_choice_logprobs_reads_one_distribution():
    "The options' first tokens from one next-token distribution: equal to option_logprobs for one-token options."
    g = llm.local_llm()
    prompt = 'Question: which is a capital? Option 0: banana. Option 1: Paris.\n{"answer": '
    first = g.choice_logprobs(prompt, ['0', '1', '2', '3'])
    full = g.option_logprobs(prompt, ['0', '1', '2', '3'])
    assert first.shape == (4,) and np.all(np.isfinite(first)) and np.all(first < 0)
    np.testing.assert_allclose(first, full, atol=0.15)          # one-token options: the same scores (batch vs one-token kernels differ slightly)
    with pytest.raises(ValueError, match='options'): g.choice_logprobs(prompt, [])
