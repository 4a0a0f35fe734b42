mod detect;
