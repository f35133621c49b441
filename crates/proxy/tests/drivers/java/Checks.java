// The driver checks for Java (MariaDB Connector/J): the same checks against
// the primary directly and through sextant, one "name: answer" line each;
// the Rust test compares the two outputs. HOST, PORT and TAG (a suffix for
// the tables this run creates) come from the environment. Each check runs
// with client-side (useServerPrepStmts=false) and server-side prepared
// statements (true: Connector/J then sends PREPARE and EXECUTE in one
// write, the execute naming "the statement just prepared").

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.*;
import java.util.ArrayList;
import java.util.List;

public class Checks {
    static final String HOST = System.getenv("HOST");
    static final String PORT = System.getenv("PORT");
    static final String TAG = System.getenv("TAG");

    interface Check {
        String run() throws Exception;
    }

    static Connection connect(String options) throws SQLException {
        return DriverManager.getConnection("jdbc:mariadb://" + HOST + ":" + PORT
                + "/sextant_test?user=app&password=apppass" + options);
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
        for (String server : new String[] {"false", "true"}) {
            String mode = server.equals("true") ? "server" : "client";
            String opts = "&useServerPrepStmts=" + server + "&allowLocalInfile=true";
            String t = "drv_java_" + mode + "_" + TAG;
            try (Connection c = connect(opts)) {
                try (Statement s = c.createStatement()) {
                    s.execute("DROP TABLE IF EXISTS " + t);
                    s.execute("CREATE TABLE " + t + " (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2), ts DATETIME(3), b BLOB)");
                }
                check("prepared_" + mode, () -> {
                    try (PreparedStatement p = c.prepareStatement("INSERT INTO " + t + " (id, v, d, ts, b) VALUES (?, ?, ?, ?, ?)")) {
                        for (int i = 1; i <= 3; i++) {
                            p.setInt(1, i);
                            p.setString(2, "v" + i + " é");
                            p.setBigDecimal(3, new java.math.BigDecimal(i + ".25"));
                            p.setTimestamp(4, Timestamp.valueOf("2024-01-0" + i + " 03:04:05.678"));
                            p.setBytes(5, new byte[] {0, (byte) i, (byte) 255});
                            p.executeUpdate();
                        }
                    }
                    StringBuilder sb = new StringBuilder();
                    try (PreparedStatement q = c.prepareStatement("SELECT id, v, d, ts, HEX(b) FROM " + t + " WHERE id >= ? ORDER BY id")) {
                        for (int from : new int[] {1, 2, 3}) {
                            q.setInt(1, from);
                            try (ResultSet r = q.executeQuery()) {
                                while (r.next()) {
                                    sb.append(r.getInt(1)).append('|').append(r.getString(2)).append('|')
                                            .append(r.getBigDecimal(3)).append('|').append(r.getTimestamp(4))
                                            .append('|').append(r.getString(5)).append(';');
                                }
                            }
                        }
                    }
                    return sb.toString();
                });
                check("batch_" + mode, () -> {
                    try (PreparedStatement p = c.prepareStatement("INSERT INTO " + t + " (id, v) VALUES (?, ?)")) {
                        for (int i = 100; i < 300; i++) {
                            p.setInt(1, i);
                            p.setString(2, "b" + i);
                            p.addBatch();
                        }
                        int[] n = p.executeBatch();
                        return "statements=" + n.length + " rows=" + count(c, t);
                    }
                });
                check("autocommit_" + mode, () -> {
                    try (Connection other = connect(opts)) {
                        c.setAutoCommit(false);
                        try (Statement s = c.createStatement()) {
                            s.executeUpdate("INSERT INTO " + t + " (id, v) VALUES (1000, 'rolled back')");
                            c.rollback();
                            s.executeUpdate("INSERT INTO " + t + " (id, v) VALUES (1001, 'committed')");
                            c.commit();
                            s.executeUpdate("INSERT INTO " + t + " (id, v) VALUES (1002, 'on autocommit')");
                            c.setAutoCommit(true);
                        }
                        try (Statement s = other.createStatement();
                             ResultSet r = s.executeQuery("SELECT GROUP_CONCAT(id ORDER BY id) FROM " + t + " WHERE id >= 1000")) {
                            r.next();
                            return "seen=" + r.getString(1) + " autocommit=" + c.getAutoCommit();
                        }
                    }
                });
                check("readonly_" + mode, () -> {
                    String ro;
                    // The replication form: setReadOnly(true) moves to the
                    // "replica", a connection Connector/J makes read-only
                    // in its connect-time SET (with its session tracking).
                    String both = HOST + ":" + PORT + "," + HOST + ":" + PORT;
                    try (Connection r = DriverManager.getConnection("jdbc:mariadb:replication://" + both
                            + "/sextant_test?user=app&password=apppass" + opts)) {
                        r.setReadOnly(true);
                        try (Statement s = r.createStatement()) {
                            s.executeUpdate("INSERT INTO " + t + " (id, v) VALUES (2000, 'read only')");
                            ro = "wrote";
                        } catch (SQLException e) {
                            ro = "ERR " + e.getErrorCode();
                        }
                        r.setReadOnly(false);
                        try (Statement s = r.createStatement()) {
                            s.executeUpdate("INSERT INTO " + t + " (id, v) VALUES (2001, 'writable')");
                        }
                    }
                    // Other connections, opened after it closed: writable.
                    List<String> others = new ArrayList<>();
                    for (int i = 0; i < 5; i++) {
                        try (Connection o = connect(opts); Statement s = o.createStatement()) {
                            s.execute("CREATE TABLE IF NOT EXISTS " + t + "_ro (a INT)");
                            others.add("ok");
                        } catch (SQLException e) {
                            others.add("ERR " + e.getErrorCode());
                        }
                    }
                    return "read_only=" + ro + " others=" + others;
                });
                check("load_data_" + mode, () -> {
                    Path f = Files.createTempFile("sextant-load", ".csv");
                    Files.writeString(f, "3000,one\n3001,two\n3002,three\n");
                    String sql = "LOAD DATA LOCAL INFILE '" + f + "' INTO TABLE " + t + " FIELDS TERMINATED BY ',' (id, v)";
                    int viaStatement;
                    try (Statement s = c.createStatement()) {
                        viaStatement = s.executeUpdate(sql);
                    }
                    try (Statement s = c.createStatement()) {
                        s.executeUpdate("DELETE FROM " + t + " WHERE id >= 3000");
                    }
                    int viaPrepared;
                    try (PreparedStatement p = c.prepareStatement(sql)) {
                        viaPrepared = p.executeUpdate();
                    }
                    Files.delete(f);
                    return "statement=" + viaStatement + " prepared=" + viaPrepared + " rows=" + count(c, t);
                });
                try (Statement s = c.createStatement()) {
                    s.execute("DROP TABLE IF EXISTS " + t);
                    s.execute("DROP TABLE IF EXISTS " + t + "_ro");
                }
            }
            check("tls_" + mode, () -> {
                try (Connection c = connect(opts + "&sslMode=trust")) {
                    String text, prepared;
                    try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SHOW STATUS LIKE 'Ssl_cipher'")) {
                        r.next();
                        text = r.getString(2);
                    }
                    try (PreparedStatement p = c.prepareStatement("SHOW STATUS LIKE 'Ssl_cipher'"); ResultSet r = p.executeQuery()) {
                        r.next();
                        prepared = r.getString(2);
                    }
                    return "cipher=" + !text.isEmpty() + " same=" + text.equals(prepared);
                }
            });
        }
    }
}
