/** The console's entry: styles and the app, mounted on #app of index.html. */
import { render } from "preact"
import { App } from "./app.js"
import "./styles.css"

render(<App />, document.getElementById("app")!)
