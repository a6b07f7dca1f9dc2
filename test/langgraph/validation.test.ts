import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { FileStore, MemoryStore } from 'statefold';
import { validateSaver } from '../support/langgraph-validation.js';

// LangGraph's checkpointer validation suite on the memory and file stores (S3: test/integration).
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

validateSaver('memory', () => new MemoryStore());
validateSaver('file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'statefold-lg-'));
  dirs.push(dir);
  return new FileStore({ dir });
});
