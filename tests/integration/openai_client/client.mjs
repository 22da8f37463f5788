// The official `openai` client against `stave serve`: one chat completion whole and one
// streamed, and one text completion. Prints one JSON line with what it got; exits 1 (with the
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

const whole = await client.chat.completions.create({ ...request, model });
check(whole.object === "chat.completion", "object");
check(whole.choices.length === 1 && whole.choices[0].message.role === "assistant", "choices[0].message");
check(["stop", "length"].includes(whole.choices[0].finish_reason), "finish_reason");
check(whole.usage.total_tokens === whole.usage.prompt_tokens + whole.usage.completion_tokens, "usage");

const stream = await client.chat.completions.create({ ...request, model, stream: true, stream_options: { include_usage: true } });
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
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check(usage && usage.completion_tokens === whole.usage.completion_tokens, "stream usage");

const text = await client.completions.create({ model, prompt: "The sea is", max_tokens: 4, temperature: 0 });
check(text.object === "text_completion" && typeof text.choices[0].text === "string", "text_completion");

console.log(JSON.stringify({
  model,
  text: whole.choices[0].message.content,
  finish_reason: whole.choices[0].finish_reason,
  completion_tokens: whole.usage.completion_tokens,
  streamed,
  streamed_finish_reason: finish,
  chunks,
}));
