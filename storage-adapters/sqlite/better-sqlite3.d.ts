// better-sqlite3 ships no types; binding.ts only checks that it loads, and the store's threads
// use it through the interfaces in database.ts.
declare module 'better-sqlite3' {
  const Database: unknown;
  export default Database;
}
