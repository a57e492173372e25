// A small client typed only by what openapi-typescript generates from /api/openapi.json:
// tests/http/test_openapi_tools.py writes `api.d.ts` beside this file and runs `tsc --strict`.
// Every body and answer below is checked against the document, so a change that breaks
// these calls breaks the test.
import type { components, paths } from "./api";

type Schemas = components["schemas"];
export type ApiError = Schemas["Error"];

type SendMessage = paths["/api/integrations/oauth/chat/channels/{channel_id}/messages"]["post"];
type ReadChatSettings = paths["/api/integrations/oauth/chat/settings"]["get"];
type StartPoll = paths["/api/integrations/oauth/polls"]["post"];

export class VolthubError extends Error {
  constructor(
    readonly status: number,
    readonly body: ApiError,
  ) {
    super(body.message);
  }

  /** Seconds to wait before retrying a 429, from the error's details. */
  retryAfter(): number | undefined {
    const seconds = this.body.details?.retry_after;
    return typeof seconds === "number" ? seconds : undefined;
  }

  /** The request id to quote to the server's operator. */
  requestId(): string | undefined {
    return this.body.details?.requestId;
  }
}

export class VolthubClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
  ) {}

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await fetch(this.baseUrl + path, {
      method,
      headers: { Authorization: `Bearer ${this.token}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) {
      throw new VolthubError(response.status, (await response.json()) as ApiError);
    }
    return (await response.json()) as T;
  }

  sendChatMessage(
    channelId: SendMessage["parameters"]["path"]["channel_id"],
    body: SendMessage["requestBody"]["content"]["application/json"],
  ): Promise<SendMessage["responses"][200]["content"]["application/json"]> {
    return this.call("POST", `/api/integrations/oauth/chat/channels/${encodeURIComponent(channelId)}/messages`, body);
  }

  chatSettings(): Promise<ReadChatSettings["responses"][200]["content"]["application/json"]> {
    return this.call("GET", "/api/integrations/oauth/chat/settings");
  }

  startPoll(
    body: StartPoll["requestBody"]["content"]["application/json"],
  ): Promise<StartPoll["responses"][201]["content"]["application/json"]> {
    return this.call("POST", "/api/integrations/oauth/polls", body);
  }
}

// Uses that must type-check: the optional fields may be left out, the answers are read
// with their real types, and an error's details are readable members.
export async function example(client: VolthubClient, channelId: string): Promise<string> {
  const sent = await client.sendChatMessage(channelId, { message: "hello chat" });
  const settings = await client.chatSettings();
  const slow: boolean = settings.slowMode;
  const started = await client.startPoll({ title: "Next game?", options: ["Chess", "Go"], durationSeconds: 60 });
  const firstOption: string | undefined = started.poll?.options[0]?.title;
  try {
    await client.startPoll({ title: "Again?", options: ["Yes", "No"], durationSeconds: 60 });
  } catch (error) {
    if (error instanceof VolthubError && error.status === 429) {
      const wait: number = error.retryAfter() ?? 1;
      return `retry in ${wait} s (${error.requestId() ?? "no request id"})`;
    }
    throw error;
  }
  return `${JSON.stringify(sent)} ${slow} ${firstOption ?? ""}`;
}
