// The driver checks for Node (mysql2): the same checks against the primary
// directly and through sextant, one line each; the Rust test compares the
// two outputs. HOST, PORT and TAG (a suffix for the tables this run
// creates) come from the environment.
'use strict';
const mysql = require('mysql2/promise');
const crypto = require('crypto');

const { HOST: host, PORT: port, TAG: tag } = process.env;
const opts = (more = {}) => ({
  host, port: Number(port), user: 'app', password: 'apppass', database: 'sextant_test',
  supportBigNumbers: true, bigNumberStrings: true, dateStrings: true, ...more,
});
const table = `drv_node_${tag}`;
const describe = (e) => (e.errno ? `ERR ${e.errno} ${e.sqlState} ${e.sqlMessage}` : `error: ${e.code || e.message}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function check(name, f) {
  let v;
  try { v = await f(); } catch (e) { v = describe(e); }
  console.log(`${name}: ${v}`);
}

(async () => {
  const c = await mysql.createConnection(opts({ multipleStatements: true }));
  await check('select', async () => {
    const [rows, fields] = await c.query("SELECT 1+1 AS two, 'héllo 🙂' AS s, NULL AS n");
    return `${fields.map((f) => f.name)} | ${JSON.stringify(rows)}`;
  });
  await check('connection_id', async () => {
    const [[r]] = await c.query('SELECT CONNECTION_ID() AS id');
    return `matches_handshake=${String(r.id) === String(c.threadId)}`;
  });
  await check('types', async () => {
    await c.query(`CREATE TABLE ${table} (id int auto_increment primary key, i bigint unsigned, d decimal(10,3), dt datetime(6), j json, b longblob)`);
    const [res] = await c.execute(`INSERT INTO ${table} (i, d, dt, j, b) VALUES (?, ?, ?, ?, ?)`,
      ['18446744073709551615', '123.456', '2024-01-02 03:04:05.123456', '{"k": [1, 2]}', Buffer.from([0, 1, 2, 255])]);
    const [text] = await c.query(`SELECT id, i, d, dt, j, b FROM ${table}`);
    const [prep] = await c.execute(`SELECT id, i, d, dt, j, b FROM ${table} WHERE id = ?`, [res.insertId]);
    const show = (r) => JSON.stringify({ ...r, j: r.j, jtype: typeof r.j, b: r.b.toString('hex') });
    return `id=${res.insertId} affected=${res.affectedRows} text=${show(text[0])} prepared=${show(prep[0])}`;
  });
  await check('affected', async () => {
    const [same] = await c.execute(`UPDATE ${table} SET d = d WHERE id = ?`, [1]);
    const [changed] = await c.execute(`UPDATE ${table} SET d = d + 1 WHERE id = ?`, [1]);
    return `unchanged=${same.affectedRows}/${same.changedRows} changed=${changed.affectedRows}/${changed.changedRows} info=${JSON.stringify(changed.info)}`;
  });
  await check('error', async () => { await c.query('SELECT * FROM no_such_table_here'); return 'no error'; });
  await check('transaction', async () => {
    await c.beginTransaction();
    await c.query(`INSERT INTO ${table} (i) VALUES (7)`);
    const [[inside]] = await c.query(`SELECT COUNT(*) AS n FROM ${table}`);
    await c.rollback();
    const [[after]] = await c.query(`SELECT COUNT(*) AS n FROM ${table}`);
    return `inside=${inside.n} after=${after.n}`;
  });
  await check('session_state', async () => {
    // mysql2 negotiates session tracking and reports the changes it reads.
    const [a] = await c.query("SET time_zone = '+03:00'");
    const [b] = await c.query('USE sextant_test');
    const [d] = await c.query('SET @v = 5');
    const [[r]] = await c.query('SELECT @@time_zone AS tz, @v AS v, @@session_track_schema AS ts');
    return `${JSON.stringify(a.stateChanges)} ${JSON.stringify(b.stateChanges)} ${JSON.stringify(d.stateChanges)} ${JSON.stringify(r)}`;
  });
  await check('kill_query', async () => {
    const a = await mysql.createConnection(opts());
    // A second after the SLEEP is sent it is running, even on a loaded
    // machine (a KILL QUERY before it runs has nothing to kill).
    setTimeout(() => { c.query(`KILL QUERY ${a.threadId}`).catch(() => {}); }, 1000);
    const start = Date.now();
    let outcome;
    try { const [[r]] = await a.query('SELECT SLEEP(5) AS s'); outcome = `sleep=${r.s}`; } catch (e) { outcome = describe(e); }
    const quick = Date.now() - start < 3000;
    const [[one]] = await a.query('SELECT 1 AS one');
    await a.end();
    return `${outcome} quick=${quick} usable=${one.one === 1}`;
  });
  await check('wait_timeout', async () => {
    const w = await mysql.createConnection(opts());
    w.on('error', () => {});
    await w.query('SET SESSION wait_timeout = 1');
    const [[r]] = await w.query('SELECT @@wait_timeout AS wt');
    await sleep(2500);
    let closed = false;
    try { await w.query('SELECT 1'); } catch (e) { closed = true; }
    w.destroy();
    return `wait_timeout=${r.wt} closed=${closed}`;
  });
  await check('prepare_close', async () => {
    let ok = 0;
    for (let i = 0; i < 300; i++) {
      const st = await c.prepare(`SELECT ? + ${i} AS v`);
      const [[r]] = await st.execute([1]);
      if (Number(r.v) === i + 1) ok++;
      st.close();
    }
    return `ok=${ok}`;
  });
  await check('large', async () => {
    const blob = Buffer.alloc(5 << 20);
    for (let i = 0; i < blob.length; i++) blob[i] = (i * 7) & 255;
    const [res] = await c.execute(`INSERT INTO ${table} (b) VALUES (?)`, [blob]);
    const [[r]] = await c.execute(`SELECT b FROM ${table} WHERE id = ?`, [res.insertId]);
    const md5 = (b) => crypto.createHash('md5').update(b).digest('hex');
    return `same=${md5(r.b) === md5(blob)} md5=${md5(r.b)}`;
  });
  await check('multi', async () => {
    const [sets] = await c.query("SELECT 1 AS a; SELECT 'two' AS b");
    return JSON.stringify(sets);
  });
  await check('tls', async () => {
    const t = await mysql.createConnection(opts({ ssl: { rejectUnauthorized: false } }));
    const [[v]] = await t.query("SHOW STATUS LIKE 'Ssl_version'");
    const [[ci]] = await t.query("SHOW STATUS LIKE 'Ssl_cipher'");
    await t.end();
    return `version=${v.Value} cipher_in_use=${ci.Value !== ''}`;
  });
  await check('compress', async () => {
    const z = await mysql.createConnection(opts({ compress: true }));
    const [[r]] = await z.query("SELECT LENGTH(x) AS n, MD5(x) AS m FROM (SELECT REPEAT('xyz', 1000000) AS x) t");
    const [[s]] = await z.query("SHOW STATUS LIKE 'Compression'");
    const [[p]] = await z.execute('SELECT ? + 1 AS v', [41]);
    await z.end();
    return `length=${r.n} md5=${r.m} compression=${s.Value} prepared=${p.v}`;
  });
  await check('bulk', async () => {
    // MariaDB's connector sends a batch as one COM_STMT_BULK_EXECUTE when
    // the server offers bulk operations (extended capability bit 34).
    const mariadb = require('mariadb');
    const m = await mariadb.createConnection({ host, port: Number(port), user: 'app', password: 'apppass', database: 'sextant_test' });
    const offered = (m.info.serverCapabilities & (1n << 34n)) !== 0n;
    const rows = Array.from({ length: 1000 }, (_, i) => [`v${i}`, i]);
    const r = await m.batch(`INSERT INTO ${table} (j, i) VALUES (JSON_QUOTE(?), ?)`, rows);
    const [s] = await m.query(`SELECT COUNT(*) AS n, SUM(i) AS s FROM ${table} WHERE i < 1000`);
    await m.end();
    return `offered=${offered} affected=${r.affectedRows} rows=${s.n} sum=${s.s}`;
  });
  await c.query(`DROP TABLE ${table}`);
  await c.end();
})().catch((e) => { console.error(e); process.exit(1); });
