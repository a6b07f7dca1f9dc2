/** The optional peers statefold/langgraph needs, and what it says when they are missing. */
export const PEERS = ['@langchain/langgraph-checkpoint', '@langchain/core'] as const;

/** What importing or requiring `statefold/langgraph` throws when LangGraph's checkpoint package is not installed. */
export const NOT_INSTALLED =
  'statefold/langgraph needs the optional peer dependencies @langchain/langgraph-checkpoint and @langchain/core, which are not installed: run npm install @langchain/langgraph-checkpoint @langchain/core';
