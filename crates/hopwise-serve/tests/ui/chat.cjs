// A chat UI's view of a streamed hopwise answer, built with the Vercel AI SDK (`ai` and
// `@ai-sdk/openai-compatible` from npm): `streamText` reads the OpenAI-compatible stream and
// `readUIMessageStream` assembles the message the way `useChat` renders it, one part per kind.
// Usage: node chat.cjs <base url> <model> <question>
// Prints one JSON object: the stream's part types in order, the message's parts, the usage.
"use strict";
const { streamText, readUIMessageStream } = require("ai");
const { createOpenAICompatible } = require("@ai-sdk/openai-compatible");

const [base, model, question] = process.argv.slice(2);

(async () => {
  const provider = createOpenAICompatible({ name: "hopwise", baseURL: base + "/v1", apiKey: "unused" });
  const errors = [];
  const result = streamText({
    model: provider(model),
    prompt: question,
    onError: ({ error }) => errors.push(String(error && error.message ? error.message : error)),
  });
  let message = null;
  for await (const snapshot of readUIMessageStream({ stream: result.toUIMessageStream({ sendReasoning: true }) })) {
    message = snapshot;
  }
  const parts = (message ? message.parts : [])
    .filter((p) => p.type === "reasoning" || p.type === "text")
    .map((p) => ({ type: p.type, text: p.text }));
  const usage = await result.totalUsage;
  process.stdout.write(JSON.stringify({ parts, usage, errors }) + "\n");
})().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
