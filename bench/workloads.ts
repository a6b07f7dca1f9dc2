/** The workloads by name. */
import { CodingWorkload } from './text-workload.js';
import { Workload, type StepWorkload, type WorkloadName } from './workload.js';

export const WORKLOADS: readonly WorkloadName[] = ['coding', 'embeddings'];

export function makeWorkload(name: WorkloadName, size: number, change: number, seed: number): StepWorkload {
  return name === 'coding' ? new CodingWorkload(size, change, seed) : new Workload(size, change, seed);
}
