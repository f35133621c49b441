// The driver checks for Go (github.com/go-sql-driver/mysql): the same
// checks against the primary directly and through sextant, one line each;
// the Rust test compares the two outputs. HOST, PORT and TAG (a suffix for
// the tables this run creates) come from the environment.
package main

import (
	"context"
	"crypto/md5"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

var (
	host = os.Getenv("HOST")
	port = os.Getenv("PORT")
	tag  = os.Getenv("TAG")
	ctx  = context.Background()
)

func dsn(params string) string {
	return fmt.Sprintf("app:apppass@tcp(%s:%s)/sextant_test?%s", host, port, params)
}

func describe(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("ERR %d %s %s", me.Number, string(me.SQLState[:]), me.Message)
	}
	return "error: " + err.Error()
}

func check(name string, f func() (string, error)) {
	v, err := f()
	if err != nil {
		v = describe(err)
	}
	fmt.Printf("%s: %s\n", name, v)
}

func strs(rows *sql.Rows) (string, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		var cells []string
		for _, v := range vals {
			if v.Valid {
				cells = append(cells, fmt.Sprintf("%q", v.String))
			} else {
				cells = append(cells, "NULL")
			}
		}
		out = append(out, strings.Join(cells, ","))
	}
	return strings.Join(cols, ",") + " | " + strings.Join(out, " ; "), rows.Err()
}

func main() {
	db, err := sql.Open("mysql", dsn("multiStatements=true"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	table := "drv_go_" + tag

	check("select", func() (string, error) {
		rows, err := db.Query("SELECT 1+1 AS two, 'héllo 🙂' AS s, NULL AS n")
		if err != nil {
			return "", err
		}
		return strs(rows)
	})
	check("types", func() (string, error) {
		if _, err := db.Exec("CREATE TABLE " + table + " (id int auto_increment primary key, i bigint unsigned, d decimal(10,3), dt datetime(6), j json, b longblob)"); err != nil {
			return "", err
		}
		res, err := db.Exec("INSERT INTO "+table+" (i, d, dt, j, b) VALUES (?, ?, ?, ?, ?)",
			uint64(18446744073709551615), "123.456", "2024-01-02 03:04:05.123456", `{"k": [1, 2]}`, []byte{0, 1, 2, 255})
		if err != nil {
			return "", err
		}
		id, _ := res.LastInsertId()
		n, _ := res.RowsAffected()
		text, err := db.Query("SELECT id, i, d, dt, j, HEX(b) FROM " + table)
		if err != nil {
			return "", err
		}
		t, err := strs(text)
		if err != nil {
			return "", err
		}
		prep, err := db.Query("SELECT id, i, d, dt, j, HEX(b) FROM "+table+" WHERE id = ?", id)
		if err != nil {
			return "", err
		}
		p, err := strs(prep)
		return fmt.Sprintf("id=%d affected=%d text=[%s] prepared=[%s]", id, n, t, p), err
	})
	check("affected", func() (string, error) {
		same, err := db.Exec("UPDATE "+table+" SET d = d WHERE id = ?", 1)
		if err != nil {
			return "", err
		}
		changed, err := db.Exec("UPDATE "+table+" SET d = d + 1 WHERE id = ?", 1)
		if err != nil {
			return "", err
		}
		a, _ := same.RowsAffected()
		b, _ := changed.RowsAffected()
		return fmt.Sprintf("unchanged=%d changed=%d", a, b), nil
	})
	check("error", func() (string, error) {
		_, err := db.Exec("SELECT * FROM no_such_table_here")
		return "no error", err
	})
	check("transaction", func() (string, error) {
		tx, err := db.Begin()
		if err != nil {
			return "", err
		}
		if _, err := tx.Exec("INSERT INTO " + table + " (i) VALUES (7)"); err != nil {
			return "", err
		}
		var inside int
		if err := tx.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&inside); err != nil {
			return "", err
		}
		if err := tx.Rollback(); err != nil {
			return "", err
		}
		var after int
		err = db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&after)
		return fmt.Sprintf("inside=%d after=%d", inside, after), err
	})
	check("session", func() (string, error) {
		c, err := db.Conn(ctx)
		if err != nil {
			return "", err
		}
		defer c.Close()
		if _, err := c.ExecContext(ctx, "SET time_zone = '+03:00', @v = 5"); err != nil {
			return "", err
		}
		rows, err := c.QueryContext(ctx, "SELECT @@time_zone, @v, @@session.wait_timeout = @@global.wait_timeout")
		if err != nil {
			return "", err
		}
		return strs(rows)
	})
	check("kill_query", func() (string, error) {
		a, err := db.Conn(ctx)
		if err != nil {
			return "", err
		}
		defer a.Close()
		var id uint64
		if err := a.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			return "", err
		}
		go func() {
			// A second after the SLEEP is sent it is running, even on a
			// loaded machine (a KILL QUERY before it runs has nothing to kill).
			time.Sleep(1000 * time.Millisecond)
			db.Exec(fmt.Sprintf("KILL QUERY %d", id))
		}()
		start := time.Now()
		var slept sql.NullInt64
		err = a.QueryRowContext(ctx, "SELECT SLEEP(5)").Scan(&slept)
		quick := time.Since(start) < 3*time.Second
		outcome := fmt.Sprintf("sleep=%v", slept.Int64)
		if err != nil {
			outcome = describe(err)
		}
		var one int
		after := a.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		return fmt.Sprintf("%s quick=%v usable=%v", outcome, quick, after == nil && one == 1), nil
	})
	check("wait_timeout", func() (string, error) {
		c, err := db.Conn(ctx)
		if err != nil {
			return "", err
		}
		defer c.Close()
		if _, err := c.ExecContext(ctx, "SET SESSION wait_timeout = 1"); err != nil {
			return "", err
		}
		var wt string
		if err := c.QueryRowContext(ctx, "SELECT @@wait_timeout").Scan(&wt); err != nil {
			return "", err
		}
		time.Sleep(2500 * time.Millisecond)
		var one int
		err = c.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		return fmt.Sprintf("wait_timeout=%s closed=%v", wt, err != nil), nil
	})
	check("prepare_close", func() (string, error) {
		ok := 0
		for i := 0; i < 300; i++ {
			st, err := db.Prepare(fmt.Sprintf("SELECT ? + %d", i))
			if err != nil {
				return "", err
			}
			var v int
			if err := st.QueryRow(1).Scan(&v); err != nil {
				return "", err
			}
			if v == i+1 {
				ok++
			}
			if err := st.Close(); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("ok=%d", ok), nil
	})
	check("large", func() (string, error) {
		blob := make([]byte, 5<<20)
		for i := range blob {
			blob[i] = byte(i * 7)
		}
		res, err := db.Exec("INSERT INTO "+table+" (b) VALUES (?)", blob)
		if err != nil {
			return "", err
		}
		id, _ := res.LastInsertId()
		var back []byte
		if err := db.QueryRow("SELECT b FROM "+table+" WHERE id = ?", id).Scan(&back); err != nil {
			return "", err
		}
		return fmt.Sprintf("same=%v md5=%x", md5.Sum(back) == md5.Sum(blob), md5.Sum(back)), nil
	})
	check("multi", func() (string, error) {
		rows, err := db.Query("SELECT 1 AS a; SELECT 'two' AS b")
		if err != nil {
			return "", err
		}
		defer rows.Close()
		var got []string
		for {
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					return "", err
				}
				got = append(got, v)
			}
			if !rows.NextResultSet() {
				break
			}
		}
		return strings.Join(got, ","), rows.Err()
	})
	check("tls", func() (string, error) {
		t, err := sql.Open("mysql", dsn("tls=skip-verify"))
		if err != nil {
			return "", err
		}
		defer t.Close()
		var name, version, cipher string
		if err := t.QueryRow("SHOW STATUS LIKE 'Ssl_version'").Scan(&name, &version); err != nil {
			return "", err
		}
		if err := t.QueryRow("SHOW STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil {
			return "", err
		}
		return fmt.Sprintf("version=%s cipher_in_use=%v", version, cipher != ""), nil
	})
	check("compress", func() (string, error) {
		z, err := sql.Open("mysql", dsn("compress=true"))
		if err != nil {
			return "", err
		}
		defer z.Close()
		var n int
		var sum, name, on string
		if err := z.QueryRow("SELECT LENGTH(x), MD5(x) FROM (SELECT REPEAT('xyz', 1000000) AS x) t").Scan(&n, &sum); err != nil {
			return "", err
		}
		if err := z.QueryRow("SHOW STATUS LIKE 'Compression'").Scan(&name, &on); err != nil {
			return "", err
		}
		return fmt.Sprintf("length=%d md5=%s compression=%s", n, sum, on), nil
	})
	check("ed25519", func() (string, error) {
		// An account that logs in with MariaDB's client_ed25519 (ED_USER,
		// ED_PASS: on the server directly, or a sextant user configured so).
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd = os.Getenv("ED_USER"), os.Getenv("ED_PASS")
		cfg.Net, cfg.Addr, cfg.DBName = "tcp", host+":"+port, "sextant_test"
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return "", err
		}
		e := sql.OpenDB(conn)
		defer e.Close()
		var one int
		// The driver drops a trailing zero byte of the server's 32-byte
		// nonce and then calls it malformed: one login in 256 against
		// MariaDB fails so. A new login has a new nonce.
		for try := 0; ; try++ {
			err := e.QueryRow("SELECT 1").Scan(&one)
			if err == nil {
				break
			}
			if !errors.Is(err, mysql.ErrMalformPkt) || try == 4 {
				return "", err
			}
		}
		cfg.Passwd = "wrong"
		bad, _ := mysql.NewConnector(cfg)
		b := sql.OpenDB(bad)
		defer b.Close()
		return fmt.Sprintf("login=%d wrong_password=[%s]", one, describeLogin(b.Ping())), nil
	})
	db.Exec("DROP TABLE " + table)
}

// The error of a refused login without the parts that name the account
// or the host.
func describeLogin(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("ERR %d %s", me.Number, string(me.SQLState[:]))
	}
	if err == nil {
		return "no error"
	}
	return "error: " + err.Error()
}
