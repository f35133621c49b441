// The driver checks for Oracle's MySQL Connector/J: the same checks against
// the primary directly and through sextant, one "name: answer" line each;
// the Rust test compares the two outputs. HOST, PORT, TAG (a suffix for the
// tables this run creates) and PAUSE_MS (longer than sextant's hold window)
// come from the environment.
//
// What this driver sends that others do not: `SET character_set_results =
// NULL` at every connect (session tracking reports the NULL as ''), and,
// with rewriteBatchedStatements, a batch of more than four statements as
// one multi-statement between COM_SET_OPTION on and off.

import java.sql.*;

public class OracleChecks {
    static final String HOST = System.getenv("HOST");
    static final String PORT = System.getenv("PORT");
    static final String TAG = System.getenv("TAG");
    static final long PAUSE_MS = Long.parseLong(System.getenv("PAUSE_MS"));

    interface Check {
        String run() throws Exception;
    }

    static Connection connect(String options) throws SQLException {
        return DriverManager.getConnection("jdbc:mysql://" + HOST + ":" + PORT
                + "/sextant_test?user=app&password=apppass&sslMode=DISABLED"
                + "&allowPublicKeyRetrieval=true" + options);
    }

    static void check(String name, Check c) {
        String v;
        try {
            v = c.run();
        } catch (SQLException e) {
            v = "ERR " + e.getErrorCode() + " " + e.getSQLState();
        } catch (Exception e) {
            v = "error: " + e;
        }
        System.out.println(name + ": " + v);
    }

    static long count(Connection c, String table) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT COUNT(*) FROM " + table)) {
            r.next();
            return r.getLong(1);
        }
    }

    public static void main(String[] args) throws Exception {
        String t = "drv_cj_" + TAG;
        try (Connection c = connect("&rewriteBatchedStatements=true")) {
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE IF EXISTS " + t);
                s.execute("CREATE TABLE " + t + " (id INT PRIMARY KEY, v INT)");
            }
            // Right after a write (the session holds its connection), a
            // batch of ten statements: sent as one multi-statement.
            check("rewritten_batch", () -> {
                try (Statement s = c.createStatement()) {
                    s.executeUpdate("INSERT INTO " + t + " VALUES (0, 0)");
                    for (int i = 1; i <= 10; i++) {
                        s.addBatch("INSERT INTO " + t + " VALUES (" + i + ", " + i + ")");
                    }
                    int[] n = s.executeBatch();
                    return "statements=" + n.length + " rows=" + count(c, t);
                }
            });
            // A prepared batch, rewritten to one multi-row INSERT.
            check("rewritten_prepared_batch", () -> {
                try (PreparedStatement p = c.prepareStatement("INSERT INTO " + t + " VALUES (?, ?)")) {
                    for (int i = 11; i <= 30; i++) {
                        p.setInt(1, i);
                        p.setInt(2, i);
                        p.addBatch();
                    }
                    p.executeBatch();
                    return "rows=" + count(c, t);
                }
            });
            // After a pause longer than the hold window, statements move to
            // other pooled connections, which must get the session's state
            // (character_set_results NULL among it).
            check("after_pauses", () -> {
                StringBuilder out = new StringBuilder();
                for (int i = 0; i < 3; i++) {
                    Thread.sleep(PAUSE_MS);
                    try (Statement s = c.createStatement();
                         ResultSet r = s.executeQuery("SELECT COUNT(*), @@character_set_results IS NULL FROM " + t)) {
                        r.next();
                        out.append(r.getLong(1)).append('/').append(r.getInt(2)).append(' ');
                    }
                }
                return out.toString().trim();
            });
            check("batch_after_pause", () -> {
                Thread.sleep(PAUSE_MS);
                try (Statement s = c.createStatement()) {
                    for (int i = 31; i <= 36; i++) {
                        s.addBatch("INSERT INTO " + t + " VALUES (" + i + ", " + i + ")");
                    }
                    s.executeBatch();
                }
                return "rows=" + count(c, t);
            });
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE IF EXISTS " + t);
            }
        }
    }
}
