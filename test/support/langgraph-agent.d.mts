/** A LangGraph coding agent for the saver tests (see langgraph-agent.mjs). */
import type { HumanMessage } from '@langchain/core/messages';

export const FILES: string[];
export const QUESTION: HumanMessage;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function buildGraph(checkpointer: unknown, options?: { files?: number; delayMs?: number }): any;
export function outcome(messages: unknown[]): { type: string; content: unknown; tool_call_id: string | null }[];
