/** What importing or requiring `statefold/testing` throws when vitest is not installed. */
export const NOT_INSTALLED =
  'statefold/testing needs the optional peer dependency vitest, which is not installed: run npm install --save-dev vitest';
