/** A LangGraph coding agent for the saver tests (see langgraph-agent.mjs). */
export const FILES: string[];
export const QUESTION: unknown;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function buildGraph(checkpointer: unknown, options?: { files?: number; delayMs?: number }): any;
export function outcome(messages: unknown[]): { type: string; content: unknown; tool_call_id: string | null }[];
