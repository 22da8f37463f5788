// The official `openai` client against `stave serve`: one chat completion whole and one
// streamed (both with logprobs and top_logprobs), and one text completion (with logprobs: N). Prints one JSON line with what it got; exits 1 (with the
// reason on stderr) when a reply is not in OpenAI's shape.
// Usage: node client.mjs BASE_URL REQUEST.json   (BASE_URL: http://127.0.0.1:PORT/v1)
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const [baseURL, requestFile] = process.argv.slice(2);
const request = JSON.parse(readFileSync(requestFile, "utf8"));
const client = new OpenAI({ baseURL, apiKey: process.env.STAVE_TEST_API_KEY ?? "unused", maxRetries: 0, timeout: 120000 });

function check(cond, what) {
  if (!cond) {
    console.error(`not OpenAI's shape: ${what}`);
    process.exit(1);
  }
}

const models = await client.models.list();
check(models.data.length === 1 && typeof models.data[0].id === "string", "models.list");
const model = models.data[0].id;

// Log-probabilities in OpenAI's chat schema: one entry per completion token.
function checkChatLogprobs(content, n, what) {
  check(Array.isArray(content) && content.length === n, `${what}: logprobs.content has one entry per token`);
  for (const e of content) {
    check(typeof e.token === "string" && typeof e.logprob === "number" && e.logprob <= 0, `${what}: token, logprob`);
    check(Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256), `${what}: bytes`);
    check(Array.isArray(e.top_logprobs) && e.top_logprobs.length === 2, `${what}: top_logprobs`);
    check(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob, `${what}: top_logprobs order`);
  }
}

const whole = await client.chat.completions.create({ ...request, model, logprobs: true, top_logprobs: 2 });
check(whole.object === "chat.completion", "object");
check(whole.choices.length === 1 && whole.choices[0].message.role === "assistant", "choices[0].message");
check(["stop", "length"].includes(whole.choices[0].finish_reason), "finish_reason");
check(whole.usage.total_tokens === whole.usage.prompt_tokens + whole.usage.completion_tokens, "usage");
checkChatLogprobs(whole.choices[0].logprobs?.content, whole.usage.completion_tokens, "chat.completion");

const stream = await client.chat.completions.create({
  ...request, model, stream: true, stream_options: { include_usage: true }, logprobs: true, top_logprobs: 2,
});
const streamedLogprobs = [];
let streamed = "";
let finish = null;
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  check(chunk.object === "chat.completion.chunk", "chunk.object");
  chunks += 1;
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    streamed += c.delta?.content ?? "";
    streamedLogprobs.push(...(c.logprobs?.content ?? []));
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check(usage && usage.completion_tokens === whole.usage.completion_tokens, "stream usage");
checkChatLogprobs(streamedLogprobs, whole.usage.completion_tokens, "chat.completion.chunk");
check(JSON.stringify(streamedLogprobs) === JSON.stringify(whole.choices[0].logprobs.content), "streamed logprobs = whole");

const text = await client.completions.create({ model, prompt: "The sea is", max_tokens: 4, temperature: 0, logprobs: 2 });
check(text.object === "text_completion" && typeof text.choices[0].text === "string", "text_completion");
const lp = text.choices[0].logprobs;
check(lp && lp.tokens.length === text.usage.completion_tokens && lp.token_logprobs.length === lp.tokens.length &&
      lp.top_logprobs.length === lp.tokens.length && lp.text_offset.length === lp.tokens.length, "completion logprobs");
check(lp.top_logprobs.every((d, i) => d[lp.tokens[i]] === lp.token_logprobs[i]), "completion top_logprobs hold the picked token");

console.log(JSON.stringify({
  model,
  text: whole.choices[0].message.content,
  finish_reason: whole.choices[0].finish_reason,
  completion_tokens: whole.usage.completion_tokens,
  streamed,
  streamed_finish_reason: finish,
  chunks,
  logprob_tokens: whole.choices[0].logprobs.content.map((e) => e.token).join(""),
}));
